"""When a running job saves a checkpoint: every tenth of the run or every minute of work,
whichever comes first, never more often than every 2 s. A long run's first checkpoint
comes after a minute, not after a tenth of it: an early death loses a minute at most."""

from pathlib import Path

import pytest

from app.ml.training import checkpoints
from app.ml.training.adapter_metadata import AdapterMetadata
from app.ml.training.checkpoints import EVERY_SECONDS, MIN_SECONDS, Checkpointer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(checkpoints.time, "monotonic", clock)
    return clock


def checkpointer(tmp_path: Path, total_steps: int) -> Checkpointer:
    metadata = AdapterMetadata(base_model="builtin:tiny")
    return Checkpointer(tmp_path, total_steps=total_steps, metadata=metadata)


def test_a_long_runs_first_checkpoint_comes_after_a_minute_of_work(
    tmp_path: Path, clock: Clock
) -> None:
    saving = checkpointer(tmp_path, total_steps=10_000)  # a tenth: 1,000 steps
    clock.now += EVERY_SECONDS - 1
    assert not saving.due(40)
    clock.now += 1
    assert saving.due(41)


def test_a_short_run_saves_every_tenth_but_never_more_often_than_every_2_s(
    tmp_path: Path, clock: Clock
) -> None:
    saving = checkpointer(tmp_path, total_steps=100)
    clock.now += MIN_SECONDS - 0.1
    assert not saving.due(50)  # half the run, but too soon
    clock.now += 0.1
    assert not saving.due(9) and saving.due(10)
