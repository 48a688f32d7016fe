"""Take the model home: files other tools load (merged.py, gguf.py with ollama.py; the
adapter itself is portable, see training/model_card.py). Light to import: the API imports
this package's names, and the heavy modules only when an export runs."""

from collections.abc import Callable
from typing import Literal, get_args

from app.core.language import Sentence

Progress = Callable[[float, Sentence], None]  # share done (0 to 1), what is happening
GgufType = Literal["f16", "bf16", "q8_0"]  # a GGUF export's weights
GGUF_TYPES: tuple[GgufType, ...] = get_args(GgufType)
DEFAULT_GGUF_TYPE: GgufType = "f16"  # lossless for f16 and bf16 bases
