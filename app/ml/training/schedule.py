"""Which examples each optimizer step trains on."""

import itertools
import math
import random

from app.ml.data import Example


def step_schedule(
    examples: list[Example], batch_size: int, seed: int, total_steps: int
) -> list[list[Example]]:
    """The examples of each optimizer step: a fresh shuffle every epoch, fixed by the seed.

    An epoch's steps are as even as they can be: 10 examples at 8 a step make two steps of
    5, not one of 8 and one of 2, whose gradient would be twice as noisy at the same rate.
    """
    rng = random.Random(seed)
    steps = math.ceil(len(examples) / batch_size)
    bounds = [len(examples) * i // steps for i in range(steps + 1)]
    schedule: list[list[Example]] = []
    while len(schedule) < total_steps:
        order = examples[:]
        rng.shuffle(order)
        schedule.extend(order[a:b] for a, b in itertools.pairwise(bounds))
    return schedule[:total_steps]


def cycled(pool: list[Example], wanted: int, step: int) -> list[Example]:
    """`wanted` of the pool for this step, going round it step after step."""
    wanted = min(len(pool), wanted)
    if not wanted:
        return []
    start = step * wanted % len(pool)
    return [pool[(start + i) % len(pool)] for i in range(wanted)]
