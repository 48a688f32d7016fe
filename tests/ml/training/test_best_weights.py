"""The overfitting guard keeps the best validation epoch's weights, ties going to the later."""

import torch

from app.ml.training.best_weights import BestWeights, ValidationScore


def score(step: int, exact: int) -> ValidationScore:
    return ValidationScore(epoch=step, step=step, exact=exact, examples=10, loss=1.0)


def model() -> tuple[torch.nn.Sequential, torch.Tensor]:
    """A two-layer net and its last weight (the one the tests change)."""
    first, last = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    first.weight.requires_grad_(False)  # frozen: not the guard's to copy
    return torch.nn.Sequential(first, last), last.weight


def test_worse_final_weights_are_replaced_by_the_best() -> None:
    net, weight = model()
    best = BestWeights(net)
    assert set(best.trainable) == {"0.bias", "1.weight", "1.bias"}
    with torch.no_grad():
        weight.fill_(1.0)
    assert best.offer(score(1, exact=6))
    with torch.no_grad():
        weight.fill_(2.0)
    assert not best.offer(score(2, exact=4))
    kept = best.restore()
    assert kept is not None and kept.step == 1
    assert torch.equal(weight, torch.ones(2, 2))


def test_ties_keep_the_later_weights_and_nothing_is_restored() -> None:
    net, weight = model()
    best = BestWeights(net)
    assert best.offer(score(1, exact=0))
    with torch.no_grad():
        weight.fill_(3.0)
    assert best.offer(score(2, exact=0))  # unseen facts: zero throughout, keep training's
    assert best.restore() is None
    assert torch.equal(weight, torch.full((2, 2), 3.0))
