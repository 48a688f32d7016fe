"""What a finished run measured. No torch here: the API process reads it too."""

from dataclasses import asdict, dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from app.core.language import Sentence
from app.ml.training.progress import LoopProgress


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
    first_loss: float | None = None  # the first step's: whether the loss fell at all
    eval_loss: float | None = None
    eval_exact_match: float | None = None
    eval_examples: int | None = None
    steady_tokens_per_second: float | None = None  # after the first steps
    # the forgetting meter: general questions the base answered right (0: it knew none),
    # and of those the ones the trained model still does
    knowledge_known: int | None = None
    knowledge_kept: int | None = None
    # …and the ones the adapter answers right answering all of them, as an export does
    # (there is no scope outside qatune's serving); None: it has no scope
    knowledge_alone: int | None = None
    # trained further: of the answers the starting model was trained on (keep_answers), the
    # ones it still gives exactly (kept_answers)
    kept_answers: int | None = None
    keep_answers: int | None = None
    # reinforcement that ended early (reward_watch.py): flat | collapse, and at which step
    reward_stop: str | None = None
    reward_stop_step: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def run_metrics(
    done: LoopProgress, steps_per_epoch: int, device: str, dtype: str
) -> TrainingMetrics:
    """What a finished loop measured."""
    seconds = done.seconds
    return TrainingMetrics(
        train_steps=done.step,
        train_tokens=done.train_tokens,
        computed_tokens=done.computed_tokens,
        train_runtime_s=round(seconds, 3),
        tokens_per_second=round(done.train_tokens / seconds, 1) if seconds else 0.0,
        computed_tokens_per_second=round(done.computed_tokens / seconds, 1) if seconds else 0.0,
        steady_tokens_per_second=round(done.steady_tokens_per_second, 1)
        if done.steady_tokens_per_second
        else None,
        final_loss=round(done.losses[-1], 5) if done.losses else None,
        first_loss=round(done.losses[0], 5) if done.losses else None,
        train_loss=round(sum(done.losses) / len(done.losses), 5) if done.losses else None,
        epochs=round(done.step / steps_per_epoch, 3),
        device=device,
        dtype=dtype,
    )


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
    kept_reason: str = ""  # kept_why in English (read in the reader's language: the API)
    kept_why: Sentence | None = None
    unfinished: int = 0  # answers the table's time limit cut short (shown as they stood)
    base_reused: int = 0  # base-model answers read from earlier jobs on this base
    rows: list[AnswerCheck]
