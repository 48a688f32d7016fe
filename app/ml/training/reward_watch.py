"""Whether a reinforcement run is getting anywhere, read from each step's samples.

Two ways GRPO goes nowhere, or worse, while its loss looks fine:

- **Flat at zero.** Every sampled answer scored 0: every advantage is 0, so no step moves
  the model at all (a grader that cannot score the data, or answers the model cannot yet
  give). After an epoch of such steps (three at least) the run ends and says so.
- **Collapse.** The answers turn to noise, often while the reward rises ("e te re re re
  are torere" under a fuzzy_match grader that a repeated syllable pleases): the policy
  found the grader's blind spot, or its steps were too large. The samples' share of
  distinct tokens (each answer's distinct tokens over its tokens, averaged) falls with it;
  the first step's share is the model's own. Two steps in a row under half of it end the
  run, with the weights of the last step whose samples were still at 80% of it.

A resumed run reads the model's own share afresh, at its first step.
"""

from dataclasses import dataclass
from typing import Literal

from app.core.language import Sentence, said

FLAT_STEPS_AT_LEAST = 3
DEGENERATE_BELOW = 0.5  # of the first step's distinct-token share
HEALTHY_FROM = 0.8  # …and at least this much: weights worth going back to
COLLAPSE_STEPS = 2  # degenerate steps in a row that end the run

RewardStopKind = Literal["flat", "collapse"]


@dataclass(frozen=True)
class RewardStop:
    """Why a reinforcement run ended before its last step."""

    kind: RewardStopKind
    step: int  # the step whose samples decided it (1-based: steps taken with it)
    healthy_step: int | None  # collapse: the step whose weights the run keeps
    reason: Sentence


def distinct_share(answers: list[list[int]]) -> float | None:
    """The mean over the answers of their distinct tokens' share (None: no tokens)."""
    shares = [len(set(tokens)) / len(tokens) for tokens in answers if tokens]
    return sum(shares) / len(shares) if shares else None


class RewardWatch:
    def __init__(self, steps_per_epoch: int) -> None:
        self.flat_steps = max(FLAT_STEPS_AT_LEAST, steps_per_epoch)
        self.zero_steps = 0  # steps in a row whose every answer scored 0…
        self.zero_answers = 0  # …and their answers
        self.own_share: float | None = None  # the first step's distinct-token share
        self.degenerate_steps = 0
        self.stop: RewardStop | None = None

    def healthy(self, answers: list[list[int]]) -> bool:
        """Whether the weights that sampled these answers are worth going back to."""
        share = distinct_share(answers)
        if share is None or self.own_share is None:
            return share is not None
        return share >= HEALTHY_FROM * self.own_share

    def read(
        self, step: int, rewards: list[float], answers: list[list[int]], healthy_step: int | None
    ) -> RewardStop | None:
        """The step's samples and their rewards read (`step` from 1); a stop, if it ends the
        run here. `healthy_step`: the last step whose samples were healthy, if any."""
        scored = any(rewards)
        self.zero_steps = 0 if scored else self.zero_steps + 1
        self.zero_answers = 0 if scored else self.zero_answers + len(rewards)
        if self.zero_steps >= self.flat_steps:
            self.stop = RewardStop(
                "flat",
                step,
                None,
                said(
                    "every one of the {answers} answers sampled in {steps} steps scored 0, so "
                    "no step could move the model; check the grader on a few of the model's "
                    "own answers (the graders' run endpoint), or teach the answers first with "
                    "supervised pairs and train that model further",
                    answers=self.zero_answers,
                    steps=self.zero_steps,
                ),
            )
            return self.stop
        share = distinct_share(answers)
        if share is None:
            return None
        if self.own_share is None:
            self.own_share = share
            return None
        degenerate = share < DEGENERATE_BELOW * self.own_share
        self.degenerate_steps = self.degenerate_steps + 1 if degenerate else 0
        if self.degenerate_steps < COLLAPSE_STEPS:
            return None
        self.stop = RewardStop(
            "collapse",
            step,
            healthy_step,
            said(
                "the sampled answers turned to noise ({share:.0%} of their tokens distinct, "
                "{own:.0%} at the start): the grader rewards something other than good "
                "answers, or the steps are too large; use a grader that scores the whole "
                "answer (string_check, or a model grader), a higher beta, or a lower "
                "learning_rate",
                share=share,
                own=self.own_share,
            ),
        )
        return self.stop
