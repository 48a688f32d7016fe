"""Which examples each optimizer step trains on."""

from collections import Counter

from app.ml.data import Example
from app.ml.training.schedule import step_schedule


def examples(n: int) -> list[Example]:
    return [Example(input_ids=[i, i + 1], prompt_len=1) for i in range(n)]


def test_every_example_once_an_epoch_in_steps_as_even_as_they_can_be() -> None:
    data = examples(10)
    schedule = step_schedule(data, batch_size=8, seed=1, total_steps=6)  # three epochs
    assert [len(step) for step in schedule] == [5, 5, 5, 5, 5, 5]  # not 8 and 2
    for epoch in range(3):
        seen = Counter(id(e) for step in schedule[2 * epoch : 2 * epoch + 2] for e in step)
        assert sorted(seen.values()) == [1] * 10
    assert schedule[0] != schedule[2]  # a fresh shuffle each epoch
    sizes = [len(s) for s in step_schedule(examples(90), batch_size=8, seed=1, total_steps=12)]
    assert sorted(set(sizes)) == [7, 8] and sum(sizes) == 90
    assert step_schedule(data, batch_size=8, seed=1, total_steps=6) == schedule  # the seed's
