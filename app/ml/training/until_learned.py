"""Auto epochs: train until the data is learned, then let the learning rate settle.

An answer is learned when every one of its tokens was the model's most likely one as the
training step saw it: exactly the condition under which greedy decoding gives it word for
word (each step's input is then the right token). The fused loss reports that per token at
no cost (fused.py), so counting costs nothing either.

The learning rate decays linearly over the cap, as in a fixed run of that length: long
answers need the falling rate to get their last few tokens right (100 pairs of ~190
characters: 87/90 learned with the decay, 72/90 with a flat rate then a late decay, the
same 28 epochs). At the end of the first epoch that leaves every answer learned, it decays
from where it is to zero over a fifth of the steps trained so far (one epoch at least),
and training ends: a rate kept up long after a small set is learned undoes, each epoch,
answers learned the one before. When no more answers are learned and their token
accuracy is no better for a while (the patience), the rate is halved, as a careful
practitioner does on a plateau (PyTorch's ReduceLROnPlateau), and progress is judged
from there on against where the run stood at the cut; after the third halving without
progress it settles the same way and training ends.

The cap is where a run still learning is cut short, not where a set is learned: a large
set learns most of its answers as the rate falls towards the cap's end (300 short
look-alike answers on the built-in model: 82 learned at the cap, 20 more each epoch). So
a run still learning more answers near the cap gets half the cap again, up to twice the cap
(planner.longest_steps), the rate falling on from where it is to zero at the new end.

Where it will end is estimated for progress and ETA: the typical epochs of a set
(hyperparameters.EXPECTED_AUTO_EPOCHS) until the run's own curve says more, then the epoch
at which the answers' token error, falling as it has over the last epochs, reaches what a
learned set shows; exact once the rate settles. The share of the run shown never goes back.
"""

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from app.core.language import Sentence, said
from app.ml.data import Batch
from app.ml.general_prompts import KEEP_ANSWERS_AT_LEAST

if TYPE_CHECKING:
    from app.ml.training.checkpoints import LoopProgress

SETTLE_SHARE = 0.2
MIN_PATIENCE_EPOCHS = 3
MIN_GAIN = 0.002  # of token accuracy: less is no progress
PLATEAU_FACTOR = 0.5  # the rate's cut on a plateau…
MAX_CUTS = 3  # …this many times; the next plateau ends training
TREND_EPOCHS = 2  # the token error's fall is measured over this many epochs
LEARNED_ERROR = 5e-4  # about the token error at which a set is learned whole
STEADY_RATE = 0.95  # a fall slower than this an epoch is no trend (a plateau)
# The error falls geometrically only near the end: above this share it speeds up as the
# model finds the set's patterns, and extrapolating it overshoots (100 epochs for 21)
TREND_BELOW_ERROR = 0.1
EXTEND_WITHIN = 0.2  # of the first cap: a run still learning this near its end…
EXTEND_BY = 0.5  # …gets this share of the first cap more, up to its longest


@dataclass(frozen=True)
class StartingAnswers:
    """Of the answers the model a job trains further was trained on, those still given."""

    given: int
    total: int

    @property
    def enough(self) -> bool:
        return self.given >= KEEP_ANSWERS_AT_LEAST * self.total


@dataclass(frozen=True)
class EpochReport:
    epoch: int
    learned: int
    examples: int
    token_accuracy: float
    settling_from: int | None  # the step where the decay began, if it has
    reason: Sentence | None  # why it settles: None until it does
    written: int | None = None  # question noise: those given to the questions as written
    cut: bool = False  # a plateau: the learning rate was cut this epoch
    extended: bool = False  # still learning near the cap: the cap was raised this epoch


class UntilLearned:
    def __init__(
        self,
        examples: int,
        steps_per_epoch: int,
        cap_steps: int,
        patience: int,
        expected_epochs: int,
        longest_steps: int | None = None,
    ):
        """`longest_steps`: as far as the cap may be raised (planner.longest_steps); None:
        not at all."""
        self.examples = examples
        self.expected_epochs = expected_epochs
        self.steps_per_epoch = steps_per_epoch
        self.cap_steps = cap_steps
        self.first_cap = cap_steps
        self.max_steps = max(cap_steps, longest_steps or cap_steps)
        # The rate's linear decay runs from this step and factor to zero at the cap: from
        # the start, until the cap is raised
        self.decay_from: tuple[int, float] = (0, 1.0)
        self.patience = max(MIN_PATIENCE_EPOCHS, patience)
        self.answered: dict[int, bool] = {}  # by id(example): the same objects all run long
        self.recorded: set[int] = set()  # answered since the last merge (data parallel)
        self.hits = self.targets = 0  # this epoch's answer tokens
        self.best_learned, self.best_accuracy, self.best_epoch = -1, -1.0, 0
        self.best_written = -1  # question noise: the most answers to the questions as written
        self.settle_from, self.settle_steps = cap_steps, 0  # the cap's own decay ends it
        self.settled_early = False
        self.best_kept = 0
        self.scale = 1.0  # of the learning rate, after the plateaus' cuts
        self.errors: dict[int, float] = {}  # by epoch: the share of answer tokens wrong
        self.shown = 0.0  # the share of the run progress has shown

    def lr_factor(self, step: int) -> float:
        if step < self.settle_from:
            return self.scale * self._decay(step)
        settled = (step - self.settle_from) / max(1, self.settle_steps)
        return self.scale * self._decay(self.settle_from) * max(0.0, 1.0 - settled)

    def _decay(self, step: int) -> float:
        start, factor = self.decay_from
        return factor * max(0.0, 1.0 - (step - start) / max(1, self.cap_steps - start))

    @property
    def end_step(self) -> int:
        return min(self.cap_steps, self.settle_from + self.settle_steps)

    def record(self, batch: Batch, hits: torch.Tensor) -> None:
        """Which of the job's answers are learned: a noisy copy counts for its example,
        a replayed answer (the model's own, keeping.py) or a drilled one not at all."""
        for example, right, got in batch.answered_tokens(hits):
            if example.replay or example.drilled:
                continue
            key = id(example.origin or example)
            self.answered[key] = right
            self.recorded.add(key)
            self.hits += got
            self.targets += example.answer_tokens

    @property
    def all_learned(self) -> bool:
        """Whether every answer was learned as this epoch's steps saw it."""
        return sum(self.answered.values()) == self.examples

    def end_of_epoch(
        self, step: int, kept: StartingAnswers | None = None, written: int | None = None
    ) -> EpochReport:
        """`kept`: of the answers the model it started from was trained on, those it still
        gives, where measured; training goes on until enough are, as it does for its own.
        `written`: with question noise, the answers the weights as they are give to the
        questions as written. It settles once every answer is learned with the noise (the
        rewordings a run learns come from there: ended once the written questions were
        learned, the staff FAQ's runs got 41 of 60 rewordings right against 51), while more
        answers to the written questions are progress too (on 200 look-alike pairs the
        noisy count stalled at 100-119 as they rose to 177, and the plateau cut the rate)."""
        epoch = step // self.steps_per_epoch
        learned = sum(self.answered.values())
        accuracy = self.hits / max(1, self.targets)
        self.hits = self.targets = 0
        self.errors[epoch] = 1.0 - accuracy
        more_kept = kept is not None and kept.given > self.best_kept
        given_as_written = -1 if written is None else written
        # Answers learned that no epoch had before
        gained = learned > self.best_learned or given_as_written > self.best_written
        if gained or accuracy > self.best_accuracy + MIN_GAIN or more_kept:
            self.best_epoch = epoch
        self.best_learned = max(self.best_learned, learned)
        self.best_written = max(self.best_written, given_as_written)
        self.best_accuracy = max(self.best_accuracy, accuracy)
        self.best_kept = max(self.best_kept, kept.given if kept else 0)
        reason: Sentence | None = None
        cut = extended = False
        if not self.settled_early and step < self.settle_from:
            if learned == self.examples and (kept is None or kept.enough):
                reason = said("every answer is learned")
            elif epoch - self.best_epoch >= self.patience and self.scale > PLATEAU_FACTOR**MAX_CUTS:
                self.scale *= PLATEAU_FACTOR
                # Patience starts again from where the run is: the best so far was reached
                # at the higher rate, and a climb back towards it at the lower one is
                # progress (300 short look-alike answers fell from 73% to 60% of their
                # tokens before the cut, then rose 1-3% an epoch; judged against the 73%,
                # the next two cuts came while they rose, and none was ever learned)
                self.best_epoch, cut = epoch, True
                self.best_learned, self.best_accuracy = learned, accuracy
                self.best_written = given_as_written
            elif epoch - self.best_epoch >= self.patience:
                reason = said(
                    "no more were learned for {epochs} epochs at 1/8 of the rate",
                    epochs=self.patience,
                )
            if reason:
                self.settled_early = True
                self.settle_from = step
                self.settle_steps = max(self.steps_per_epoch, round(SETTLE_SHARE * step))
            elif gained and not cut:
                extended = self._extend_near_cap(step)
        return EpochReport(
            epoch=epoch,
            learned=learned,
            examples=self.examples,
            token_accuracy=round(accuracy, 4),
            written=written,
            settling_from=self.settle_from if step >= self.settle_from else None,
            reason=reason,
            cut=cut,
            extended=extended,
        )

    def _extend_near_cap(self, step: int) -> bool:
        """Raise the cap of a run that learned more answers this epoch than ever before, if
        its end is near and the cap can go higher; True if raised."""
        near = self.cap_steps - step <= EXTEND_WITHIN * self.first_cap
        if not near or self.cap_steps >= self.max_steps:
            return False
        self.decay_from = (step, self._decay(step))
        self.cap_steps = min(self.max_steps, self.cap_steps + round(EXTEND_BY * self.first_cap))
        self.settle_from = self.cap_steps
        return True

    def expected_end_step(self, step: int) -> int:
        """Where training is expected to end: exact once the rate settles."""
        if self.settled_early:
            return self.end_step
        learned_at = self._expected_learned_epoch(step // self.steps_per_epoch)
        steps = learned_at * self.steps_per_epoch
        return min(self.cap_steps, steps + max(self.steps_per_epoch, round(SETTLE_SHARE * steps)))

    def _expected_learned_epoch(self, epoch: int) -> int:
        typical = max(epoch + 1, self.expected_epochs)
        now, before = self.errors.get(epoch), self.errors.get(epoch - TREND_EPOCHS)
        if now is None or now >= TREND_BELOW_ERROR:
            return typical
        if now <= LEARNED_ERROR:  # about learned: the next epoch, as a rule
            return epoch + 1
        rate = (now / before) ** (1 / TREND_EPOCHS) if before else 1.0
        if rate >= STEADY_RATE:  # a plateau: the curve says nothing, the typical count does
            return typical
        return epoch + max(1, math.ceil(math.log(LEARNED_ERROR / now) / math.log(rate)))

    def shown_total(self, step: int, expected: int) -> int:
        """The total progress divides by: the expected end, unless that would move the
        bar back (the estimate grew); then the bar holds where it was."""
        if step >= expected * self.shown:
            self.shown = step / max(1, expected)
            return expected
        total = max(step, math.floor(step / self.shown))
        self.shown = step / max(1, total)
        return total

    def settle_now(self, step: int, steps: int) -> bool:
        """Begin the decay at `step`, over `steps`, unless it has begun (the time limit is
        near); True if it begins now."""
        if self.settled_early or step >= self.settle_from:
            return False
        self.settled_early = True
        self.settle_from, self.settle_steps = step, max(1, steps)
        return True

    def keep_in(self, progress: "LoopProgress") -> None:
        """Into a checkpoint: what a resumed run needs to go on as this one would have."""
        progress.lr_scale = self.scale
        if self.settled_early:
            progress.settle_from, progress.settle_steps = self.settle_from, self.settle_steps
        progress.token_errors = dict(self.errors)
        progress.shown_share = self.shown
        progress.plateau_best = (self.best_learned, self.best_accuracy, self.best_epoch)
        progress.plateau_best_written = self.best_written
        progress.cap_steps, progress.decay_from = self.cap_steps, self.decay_from

    def resume(self, progress: "LoopProgress") -> None:
        self.scale = progress.lr_scale
        if progress.settle_from is not None:
            self.settle_from, self.settle_steps = progress.settle_from, progress.settle_steps
            self.settled_early = True
        self.errors = dict(progress.token_errors)
        self.shown = progress.shown_share
        self.best_learned, self.best_accuracy, self.best_epoch = progress.plateau_best
        self.best_written = progress.plateau_best_written
        if progress.cap_steps is not None:
            self.cap_steps, self.decay_from = progress.cap_steps, progress.decay_from
            if not self.settled_early:
                self.settle_from = self.cap_steps
