"""bench/reword_probe.py: the probe counts a reworded row right only when it is placed
with its own pair."""

import torch

from bench.reword_probe import placed_right


def test_rows_near_their_pair_are_placed_with_it_and_others_are_not() -> None:
    generator = torch.Generator().manual_seed(0)
    centres = torch.randn(5, 16, generator=generator) * 4  # five pairs, far apart
    labels = torch.arange(5).repeat_interleave(8)
    train = centres[labels] + torch.randn(40, 16, generator=generator)
    reworded = torch.tensor([0, 1, 2, 3, 4, 0, 1, 2, 3, 4])
    near = centres[reworded] + torch.randn(10, 16, generator=generator)
    assert placed_right(train, labels, near, reworded) == 10
    # The same rows, each said to reword the next pair: none is placed with it
    assert placed_right(train, labels, near, (reworded + 1) % 5) == 0
