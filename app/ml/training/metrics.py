"""What a finished run measured. No torch here: the API process reads it too."""

from dataclasses import asdict, dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


@dataclass(frozen=True)
class TrainingMetrics:
    train_steps: int
    train_tokens: int  # the examples' own tokens (prompt and answer), once per pass
    computed_tokens: int  # tokens the model ran on: padding in, a shared prefix once
    train_runtime_s: float
    tokens_per_second: float  # the whole loop: first steps and warm-up included
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
    steady_tokens_per_second: float | None = None  # after the first steps

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


class AnswerCheck(BaseModel):
    """One question as the job's evaluation asked it, greedy, with and without the adapter."""

    model_config = ConfigDict(frozen=True)
    question: str
    expected: str
    tuned: str
    base: str
    match: bool  # the tuned answer is the expected one, exactly (outer spaces aside)


class EvaluationReport(BaseModel):
    """Saved beside the adapter (evaluation.json); `GET /jobs/{id}/evaluation` returns it.

    `split` says which questions were asked: the validation split when the job had one,
    else (up to MAX_ROWS of) the training questions.
    """

    model_config = ConfigDict(frozen=True)
    split: Literal["validation", "training"]
    questions: int  # asked (all of the split, or the first MAX_ROWS)
    exact_match: float  # of `questions`, tuned
    base_exact_match: float  # of `questions`, the base model alone
    kept_epoch: float | None = None  # validation kept these weights (None: no validation)
    kept_reason: str = ""
    rows: list[AnswerCheck]
