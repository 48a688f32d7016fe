"""A job's figures, as its events and its outcome leave them (services/jobs.py folds them).

While it trains: the latest step's loss, rate, speed and memory, and how many training
answers are learned; after: the run's own TrainingMetrics and the evaluation. A figure
not known yet is left out of the API's answer, not sent as null.
"""

from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from app.core.language import tr


class Outcome(BaseModel):
    """How a finished auto-epochs job ended against its target: every training answer
    learned (greedy decoding gives it word for word)."""

    target_met: bool
    learned: int
    examples: int
    summary: str


class JobMetrics(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    # the latest step (live)
    loss: float | None = None
    learning_rate: float | None = None
    tokens_per_second: float | None = None  # live: the last step; at the end: the whole loop
    rss_mb: float | None = None
    expected_epochs: float | None = None  # auto epochs: about how many the run will take
    peak_rss_mb: float | None = None
    # learned and evaluated
    train_exact_match: float | None = None  # auto epochs: the share of answers learned
    train_learned: int | None = None  # auto epochs, at the end: the answers learned…
    train_examples: int | None = None  # …of this many training examples
    eval_loss: float | None = None
    eval_exact_match: float | None = None
    eval_examples: int | None = None
    base_exact_match: float | None = None  # the base model alone, on the same questions
    kept_epoch: float | None = None  # the epoch whose weights were kept, if not the last
    # the finished run (TrainingMetrics)
    train_steps: int | None = None
    train_tokens: int | None = None
    computed_tokens: int | None = None
    train_runtime_s: float | None = None
    computed_tokens_per_second: float | None = None
    steady_tokens_per_second: float | None = None
    final_loss: float | None = None
    train_loss: float | None = None  # mean over the run
    epochs: float | None = None  # passes over the data it took
    device: str | None = None
    dtype: str | None = None

    @model_serializer(mode="wrap")
    def _known_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {key: value for key, value in handler(self).items() if value is not None}

    def outcome(self) -> Outcome | None:
        """Known once an auto-epochs run has counted its final weights."""
        if self.train_learned is None or self.train_examples is None:
            return None
        learned, examples = self.train_learned, self.train_examples
        met = learned == examples
        summary = (  # made when it is read: in the reader's language
            tr("all {examples} training answers learned", examples=examples)
            if met
            else tr(
                "{learned} of {examples} training answers learned, below the target of all of "
                "them: the answer table shows which are wrong; more time (max_minutes), a "
                "higher lora_r or shorter answers may help",
                learned=learned,
                examples=examples,
            )
        )
        return Outcome(target_met=met, learned=learned, examples=examples, summary=summary)

    def with_(self, **figures: Any) -> "JobMetrics":
        """These figures replaced (None leaves a figure as it was)."""
        known = {key: value for key, value in figures.items() if value is not None}
        return JobMetrics.model_validate({**self.model_dump(), **known})
