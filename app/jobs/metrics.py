"""A job's figures, as its events and its outcome leave them (services/jobs/lifecycle.py
folds them).

While it trains: the latest step's loss, rate, speed and memory, and how many training
answers are learned; after: the run's own TrainingMetrics and the evaluation. A figure
not known yet is left out of the API's answer, not sent as null.
"""

from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from app.core.language import tr
from app.ml.general_prompts import BROKEN_BELOW, KEEP_ANSWERS_AT_LEAST


class Outcome(BaseModel):
    """How a finished job ended: against its target (auto epochs: every training answer
    learned, word for word), and what it kept of what the base knew (the forgetting meter:
    general questions the base answered right that the tuned model still does)."""

    target_met: bool
    learned: int | None = None
    examples: int | None = None
    known: int | None = None  # general questions the base answered right (0: it knew none)
    kept: int | None = None  # of those, answered right after training
    kept_answers: int | None = None  # trained further: the starting model's answers kept…
    keep_answers: int | None = None  # …of this many it was trained on
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
    # …with question noise, that share counts the questions with words dropped; this one
    # the questions as written, at the last epoch's end (None once the two are one count)
    train_written_match: float | None = None
    train_learned: int | None = None  # auto epochs, at the end: the answers learned…
    train_examples: int | None = None  # …of this many training examples
    eval_loss: float | None = None
    eval_exact_match: float | None = None
    eval_examples: int | None = None
    base_exact_match: float | None = None  # the base model alone, on the same questions
    kept_epoch: float | None = None  # the epoch whose weights were kept, if not the last
    # the forgetting meter: general questions the base knew, and still known after training
    knowledge_known: int | None = None
    knowledge_kept: int | None = None
    knowledge_alone: int | None = None  # …by the adapter answering all, as exports do
    knowledge_agreement: float | None = None  # live, each epoch: of its own earlier answers
    # trained further: of the answers the model it started from was trained on, kept
    kept_answers: int | None = None
    keep_answers: int | None = None
    # reinforcement that ended early (reward_watch.py): flat | collapse, and at which step
    reward_stop: str | None = None
    reward_stop_step: int | None = None
    # the finished run (TrainingMetrics)
    train_steps: int | None = None
    train_tokens: int | None = None
    computed_tokens: int | None = None
    train_runtime_s: float | None = None
    computed_tokens_per_second: float | None = None
    steady_tokens_per_second: float | None = None
    final_loss: float | None = None
    first_loss: float | None = None  # the first step's
    train_loss: float | None = None  # mean over the run
    epochs: float | None = None  # passes over the data it took
    device: str | None = None
    dtype: str | None = None

    @model_serializer(mode="wrap")
    def _known_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {key: value for key, value in handler(self).items() if value is not None}

    def outcome(self) -> Outcome | None:
        """Known once a run has counted its final weights (auto epochs) or measured what
        it kept; said in the reader's language, when it is read."""
        learned, examples = self.train_learned, self.train_examples
        known, kept = self.knowledge_known, self.knowledge_kept
        counted = learned is not None and examples is not None
        measured = known is not None and (kept is not None or known == 0)
        kept_answers, keep_answers = self.kept_answers, self.keep_answers
        if not counted and not measured and kept_answers is None and self.reward_stop is None:
            return None
        parts, met = [], True
        if learned is not None and examples is not None:
            met = learned == examples
            parts.append(
                tr("all {examples} training answers learned", examples=examples)
                if met
                else self._none_learned(examples)
                if learned == 0
                else tr(
                    "{learned} of {examples} training answers learned, below the target of "
                    "all of them: the answer table shows which are wrong; more time "
                    "(max_minutes), a higher lora_r or shorter answers may help",
                    learned=learned,
                    examples=examples,
                )
            )
        if measured and known:
            assert kept is not None
            share = kept / known
            met = met and share >= BROKEN_BELOW
            parts.append(
                tr(
                    "kept {share:.0%} of what the base knew ({kept} of the {known} general "
                    "questions it answered right)",
                    share=share,
                    kept=kept,
                    known=known,
                )
                if share >= BROKEN_BELOW
                else tr(
                    "this training broke the model: it now answers only {kept} of the {known} "
                    "general questions the base answered right ({share:.0%}); train fewer "
                    "epochs, at a lower learning_rate, or with more replay",
                    share=share,
                    kept=kept,
                    known=known,
                )
            )
        if kept_answers is not None and keep_answers:
            share = kept_answers / keep_answers
            met = met and share >= KEEP_ANSWERS_AT_LEAST
            parts.append(
                tr(
                    "it still gives {kept} of the {total} answers the model it started from "
                    "was trained on ({share:.0%})",
                    kept=kept_answers,
                    total=keep_answers,
                    share=share,
                )
                if share >= KEEP_ANSWERS_AT_LEAST
                else tr(
                    "it cost the model it started from {lost} of the {total} answers it was "
                    "trained on (it still gives {share:.0%}); train fewer epochs or at a lower "
                    "learning_rate (for DPO, a higher beta), or add those answers to this "
                    "job's data",
                    lost=keep_answers - kept_answers,
                    total=keep_answers,
                    share=share,
                )
            )
        if self.reward_stop is not None:
            met = False
            parts.append(
                tr(
                    "reinforcement ended at step {step}: every sampled answer scored 0, so no "
                    "step could move the model; check the grader on a few of the model's own "
                    "answers, or teach the answers first with supervised pairs",
                    step=self.reward_stop_step,
                )
                if self.reward_stop == "flat"
                else tr(
                    "reinforcement ended at step {step}: the sampled answers turned to noise, "
                    "and the weights from before that are kept; use a grader that scores the "
                    "whole answer, a higher beta, or a lower learning_rate",
                    step=self.reward_stop_step,
                )
            )
        return Outcome(
            target_met=met,
            learned=learned,
            examples=examples,
            known=known,
            kept=kept,
            kept_answers=kept_answers,
            keep_answers=keep_answers,
            summary="; ".join(parts),
        )

    def _none_learned(self, examples: int) -> str:
        """Why a run may have learned nothing, read from its loss: one that did not fall
        points at the rate; one that fell, at the time it had."""
        first, final = self.first_loss, self.final_loss
        if first is None or final is None or not final < 0.9 * first:  # NaN: not below
            return tr(
                "none of the {examples} training answers was learned and the loss did not "
                "fall ({first} at the first step, {final} at the last): the learning rate is "
                "the likely cause (too high a rate diverges; auto uses the model's own), or "
                "answers that cannot be learned as written",
                examples=examples,
                first=_loss(first),
                final=_loss(final),
            )
        return tr(
            "none of the {examples} training answers was learned, though the loss fell "
            "({first} at the first step, {final} at the last): it needs more epochs (auto "
            "trains until they are learned), a higher lora_r, or shorter answers",
            examples=examples,
            first=_loss(first),
            final=_loss(final),
        )

    def with_(self, **figures: Any) -> "JobMetrics":
        """These figures replaced (None leaves a figure as it was)."""
        return self._replaced({key: value for key, value in figures.items() if value is not None})

    def cleared(self, *names: str) -> "JobMetrics":
        """These figures unknown again: ones that no longer hold."""
        return self._replaced(dict.fromkeys(names))

    def _replaced(self, figures: dict[str, Any]) -> "JobMetrics":
        # A stored job's metrics may hold figures no longer kept (extra="ignore"); a name
        # given here that is not a figure is a mistake, not one to drop unseen.
        unknown = figures.keys() - type(self).model_fields.keys()
        if unknown:
            raise TypeError(f"not a job metric: {', '.join(sorted(unknown))}")
        return JobMetrics.model_validate({**self.model_dump(), **figures})


def _loss(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.4g}"
