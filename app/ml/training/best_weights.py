"""The overfitting guard: with validation pairs, score the weights at every epoch's end and
keep the best, as a careful practitioner keeps the best checkpoint.

The score is how many validation answers greedy decoding gets exactly, counted in one
forward pass (an answer all of whose tokens are the model's most likely ones is exactly
what greedy decoding says: until_learned.py). Ties go to the later weights: on facts the
training data does not hold, validation stays at zero however long training runs, and
then the trained weights, not the first epoch's, are the ones to keep. Only the trainable
(LoRA) tensors are copied: a few MB in memory, no disk.
"""

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class ValidationScore:
    epoch: float
    step: int
    exact: int
    examples: int
    loss: float  # mean over the answer tokens


class BestWeights:
    def __init__(self, model: Any) -> None:
        self.trainable = {n: p for n, p in model.named_parameters() if p.requires_grad}
        self.best: ValidationScore | None = None
        self.latest: ValidationScore | None = None
        self._saved: dict[str, torch.Tensor] = {}

    def offer(self, score: ValidationScore) -> bool:
        """Keep a copy of the weights if they score at least as well as the best; True if so."""
        self.latest = score
        if self.best is not None and score.exact < self.best.exact:
            return False
        self.best = score
        self._saved = {n: p.detach().clone() for n, p in self.trainable.items()}
        return True

    def restore(self) -> ValidationScore | None:
        """Put the best weights back if the latest ones are worse; the score restored."""
        if self.best is None or self.best is self.latest:
            return None
        with torch.no_grad():
            for name, param in self.trainable.items():
                param.copy_(self._saved[name])
        return self.best
