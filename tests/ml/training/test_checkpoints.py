"""Checkpoints and resume on the built-in model: an interrupted run ends where an
uninterrupted one does, supervised or DPO."""

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from app.ml.events import Checkpointed, Resumed, StopRequest, TrainingEvent
from app.ml.hyperparameters import HyperparameterRequest
from app.ml.pairs import QAPair
from app.ml.training import checkpoints
from app.ml.training.adapter_metadata import read_adapter_metadata
from app.ml.training.checkpoints import STATE_FILE, checkpoint_dirs, latest_checkpoint, step_of
from app.ml.training.request import TrainingRequest
from app.ml.training.stops import TrainingPaused
from app.ml.training.trainer import ModelTrainer
from tests.conftest import cpu_plan, training_pairs

pytestmark = pytest.mark.slow  # every test trains

PAIRS = training_pairs()[:12]
# DPO: each question's own answer preferred over the next question's
PREFERENCES = [
    replace(pair, rejected=PAIRS[(i + 1) % len(PAIRS)].answer) for i, pair in enumerate(PAIRS)
]
ASKED = HyperparameterRequest(epochs=4, batch_size=4, lora_r=8, seed=7)  # 3 steps an epoch


def request(
    tmp_path: Path, name: str, model_cache: Path, pairs: list[QAPair] = PAIRS, **extra: Path
) -> TrainingRequest:
    return TrainingRequest(
        base_model="builtin:tiny",
        pairs=pairs,
        output_dir=tmp_path / name / "adapter",
        model_cache_dir=model_cache,
        hyperparameters=ASKED,
        device_plan=cpu_plan(),
        offline=True,
        checkpoint_dir=tmp_path / name / "checkpoints",
        # One thread: the same sums in the same order whatever else runs (a CPU share would
        # give the runs a thread count each, and their weights would differ by rounding)
        cpu_threads=1,
        **extra,  # type: ignore[arg-type]
    )


def pause_after(micro_batches: int) -> Callable[[], StopRequest | None]:
    calls = {"n": 0}

    def should_stop() -> StopRequest | None:
        calls["n"] += 1
        return "pause" if calls["n"] > micro_batches else None

    return should_stop


def lora_weights(adapter: Path) -> dict[str, torch.Tensor]:
    return load_file(adapter / "adapter_model.safetensors")


@pytest.mark.parametrize("pairs", [PAIRS, PREFERENCES], ids=["supervised", "dpo"])
def test_a_paused_and_resumed_run_ends_where_an_uninterrupted_one_does(
    tmp_path: Path, model_cache: Path, pairs: list[QAPair]
) -> None:
    whole = ModelTrainer(request(tmp_path, "whole", model_cache, pairs)).run()
    assert whole.hyperparameters.method == ("dpo" if pairs is PREFERENCES else "supervised")

    events: list[TrainingEvent] = []
    paused = request(tmp_path, "paused", model_cache, pairs)
    with pytest.raises(TrainingPaused) as stop:
        ModelTrainer(paused, on_event=events.append, should_stop=pause_after(5)).run()
    assert 0 < stop.value.step < whole.metrics.train_steps
    saved = latest_checkpoint(paused.checkpoint_dir)  # type: ignore[arg-type]
    assert saved is not None and step_of(saved) == stop.value.step
    assert any(isinstance(e.data, Checkpointed) for e in events)

    events.clear()
    resumed = ModelTrainer(
        request(tmp_path, "paused", model_cache, pairs, resume_from=saved),
        on_event=events.append,
    ).run()
    assert [e.data.step for e in events if isinstance(e.data, Resumed)] == [stop.value.step]
    assert resumed.metrics.train_steps == whole.metrics.train_steps
    # Same data order, optimizer and scheduler state: the same adapter, to float rounding.
    assert resumed.metrics.final_loss == pytest.approx(whole.metrics.final_loss, rel=1e-3)
    assert resumed.metrics.train_loss == pytest.approx(whole.metrics.train_loss, rel=1e-3)
    want, got = lora_weights(whole.adapter_dir), lora_weights(resumed.adapter_dir)
    assert want.keys() == got.keys()
    for name in want:
        assert torch.allclose(want[name], got[name], atol=1e-4), name


def test_checkpoints_are_kept_few_and_each_is_a_servable_adapter(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoints, "MIN_SECONDS", 0.0)
    run = request(tmp_path, "run", model_cache)
    ModelTrainer(run).run()
    kept = checkpoint_dirs(run.checkpoint_dir)  # type: ignore[arg-type]
    # every 10% of 12 steps (rounded up: 2), not the last (the adapter itself); the newest 3
    assert [step_of(p) for p in kept] == [6, 8, 10]
    for checkpoint in kept:
        assert read_adapter_metadata(checkpoint).base_model == "builtin:tiny"
        assert (checkpoint / STATE_FILE).exists()  # kept until the job is settled
    assert not [p for p in run.checkpoint_dir.iterdir() if p.name.startswith(".")]  # type: ignore[union-attr]
