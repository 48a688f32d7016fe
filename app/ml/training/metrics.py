"""What a finished run measured. No torch here: the API process reads it too."""

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class TrainingMetrics:
    train_steps: int
    train_tokens: int  # the examples' own tokens (prompt and answer), once per pass
    computed_tokens: int  # tokens the model ran on: padding in, a shared prefix once
    train_runtime_s: float
    tokens_per_second: float
    computed_tokens_per_second: float
    final_loss: float | None
    train_loss: float | None  # mean over the run
    epochs: float
    device: str
    dtype: str
    train_exact_match: float | None = None  # auto epochs: the share of answers learned
    eval_loss: float | None = None
    eval_exact_match: float | None = None
    eval_examples: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}
