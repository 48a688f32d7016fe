"""Take the model home: files other tools load (merged.py; the adapter itself is portable,
see training/model_card.py)."""

from collections.abc import Callable

Progress = Callable[[float, str], None]  # share done (0 to 1), what is happening
