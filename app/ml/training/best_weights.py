"""Ending with the best weights a run reached, as a careful practitioner keeps the best
checkpoint, not merely the last.

With validation pairs (the overfitting guard): the weights are scored at every epoch's end
and the best kept. The score is how many validation answers greedy decoding gets exactly,
counted in one forward pass (an answer all of whose tokens are the model's most likely
ones is exactly what greedy decoding says: until_learned.py). Ties go to the later
weights: on facts the training data does not hold, validation stays at zero however long
training runs, and then the trained weights, not the first epoch's, are the ones to keep.

With auto epochs and no validation: the weights of the epoch with the most training
answers learned (ties: the lower loss). The settling at the end usually adds answers, but
can lose one a later epoch had; the run then ends from the best epoch's weights, once a
forward pass in eval mode confirms they are better than the final ones.

Only the trainable (LoRA) tensors are copied: a few MB in memory. They go into each
checkpoint's training state too, so a resumed run still knows them.
"""

from dataclasses import asdict, dataclass
from typing import Any, Generic, TypeVar

import torch


@dataclass(frozen=True)
class ValidationScore:
    epoch: float
    step: int
    exact: int
    examples: int
    loss: float  # mean over the answer tokens


@dataclass(frozen=True)
class EpochScore:
    """Auto epochs: how many training answers an epoch's weights get exactly."""

    epoch: int
    step: int
    learned: int
    examples: int
    loss: float  # mean answer loss: the epoch's steps, or one eval pass when counted

    def beats(self, other: "EpochScore") -> bool:
        """More answers learned; on a tie, the lower loss."""
        return (self.learned, -self.loss) > (other.learned, -other.loss)


Score = TypeVar("Score", ValidationScore, EpochScore)


class WeightsCopy:
    """One copy of a model's trainable tensors, to go back to. Saving again copies into the
    same tensors: a run that saves every step allocates once."""

    def __init__(self, model: Any) -> None:
        self.trainable = {n: p for n, p in model.named_parameters() if p.requires_grad}
        self._saved: dict[str, torch.Tensor] = {}

    def save(self) -> None:
        with torch.no_grad():
            for name, param in self.trainable.items():
                if name in self._saved:
                    self._saved[name].copy_(param)
                else:
                    self._saved[name] = param.detach().clone()

    def put_back(self) -> None:
        with torch.no_grad():
            for name, param in self.trainable.items():
                param.copy_(self._saved[name])

    def swap(self) -> None:
        """The copy becomes the weights and the weights the copy."""
        with torch.no_grad():
            for name, param in self.trainable.items():
                current = param.detach().clone()
                param.copy_(self._saved[name])
                self._saved[name] = current


class _KeptCopy(WeightsCopy, Generic[Score]):
    """A copy of the weights and the copy's score."""

    score_type: type[Score]

    def __init__(self, model: Any) -> None:
        super().__init__(model)
        self.best: Score | None = None

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps of it: tensors and plain values (torch.load's safe mode)."""
        return {"weights": self._saved, "best": asdict(self.best) if self.best else None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["best"] is not None:
            self.best, self._saved = self.score_type(**state["best"]), state["weights"]


class BestWeights(_KeptCopy[ValidationScore]):
    """The overfitting guard's best validation epoch."""

    score_type = ValidationScore

    def __init__(self, model: Any) -> None:
        super().__init__(model)
        self.latest: ValidationScore | None = None

    def offer(self, score: ValidationScore) -> bool:
        """Keep a copy of the weights if they score at least as well as the best; True if so."""
        self.latest = score
        if self.best is not None and score.exact < self.best.exact:
            return False
        self.best = score
        self.save()
        return True

    def restore(self) -> ValidationScore | None:
        """Put the best weights back if the latest ones are worse; the score restored."""
        if self.best is None or self.best is self.latest:
            return None
        self.put_back()
        return self.best


class BestEpoch(_KeptCopy[EpochScore]):
    """Auto epochs: the epoch with the most training answers learned."""

    score_type = EpochScore

    def offer(self, score: EpochScore) -> bool:
        """Keep a copy of the weights if they beat the best so far; True if so."""
        if self.best is not None and not score.beats(self.best):
            return False
        self.best = score
        self.save()
        return True
