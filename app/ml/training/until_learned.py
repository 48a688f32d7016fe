"""Auto epochs: train until the data is learned, then let the learning rate settle.

An answer is learned when every one of its tokens was the model's most likely one as the
training step saw it: exactly the condition under which greedy decoding gives it word for
word (each step's input is then the right token). The fused loss reports that per token at
no cost (fused.py), so counting costs nothing either.

The learning rate stays flat while the data is being learned; at the end of the first epoch
that leaves every answer learned, or none more learned and the answers' token accuracy
no better for a while, it decays linearly to zero over a fifth of the steps trained so
far (one epoch at least), and training ends. Without either, the decay takes the last
fifth of the cap. (A schedule fixed to the cap would keep the rate high long after a
small set is learned: answers learned one epoch come undone the next.)
"""

from dataclasses import dataclass

import torch

from app.ml.data import Batch

SETTLE_SHARE = 0.2
MIN_PATIENCE_EPOCHS = 3
MIN_GAIN = 0.002  # of token accuracy: less is no progress


@dataclass(frozen=True)
class EpochReport:
    epoch: int
    learned: int
    examples: int
    token_accuracy: float
    settling_from: int | None  # the step where the decay began, if it has
    reason: str  # why it settles: "" until it does


class UntilLearned:
    def __init__(self, examples: int, steps_per_epoch: int, cap_steps: int, patience: int):
        self.examples = examples
        self.steps_per_epoch = steps_per_epoch
        self.cap_steps = cap_steps
        self.patience = max(MIN_PATIENCE_EPOCHS, patience)
        self.answered: dict[int, bool] = {}  # by id(example): the same objects all run long
        self.hits = self.targets = 0  # this epoch's answer tokens
        self.best_learned, self.best_accuracy, self.best_epoch = -1, -1.0, 0
        default_start = max(0, self.cap_steps - round(SETTLE_SHARE * self.cap_steps))
        self.settle_from, self.settle_steps = default_start, self.cap_steps - default_start
        self.settled_early = False

    def lr_factor(self, step: int) -> float:
        if step < self.settle_from:
            return 1.0
        return max(0.0, 1.0 - (step - self.settle_from) / max(1, self.settle_steps))

    @property
    def end_step(self) -> int:
        return min(self.cap_steps, self.settle_from + self.settle_steps)

    def record(self, batch: Batch, hits: torch.Tensor) -> None:
        for example, right in batch.answered(hits):
            self.answered[id(example)] = right
        self.hits += int(hits[: batch.answer_tokens].sum())
        self.targets += batch.answer_tokens

    def end_of_epoch(self, step: int) -> EpochReport:
        epoch = step // self.steps_per_epoch
        learned = sum(self.answered.values())
        accuracy = self.hits / max(1, self.targets)
        self.hits = self.targets = 0
        if learned > self.best_learned or accuracy > self.best_accuracy + MIN_GAIN:
            self.best_epoch = epoch
        self.best_learned = max(self.best_learned, learned)
        self.best_accuracy = max(self.best_accuracy, accuracy)
        reason = ""
        if not self.settled_early and step < self.settle_from:
            if learned == self.examples:
                reason = "every answer is learned"
            elif epoch - self.best_epoch >= self.patience:
                reason = f"no more were learned for {self.patience} epochs"
            if reason:
                self.settled_early = True
                self.settle_from = step
                self.settle_steps = max(self.steps_per_epoch, round(SETTLE_SHARE * step))
        return EpochReport(
            epoch=epoch,
            learned=learned,
            examples=self.examples,
            token_accuracy=round(accuracy, 4),
            settling_from=self.settle_from if step >= self.settle_from else None,
            reason=reason,
        )

    def resume(self, settle_from: int | None, settle_steps: int) -> None:
        if settle_from is not None:
            self.settle_from, self.settle_steps = settle_from, settle_steps
            self.settled_early = True
