"""Data parallel training on the CPU with gloo: two processes train one job in step, and
the adapter is the one a single process trains on the same data."""

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from app.ml.events import TrainingEvent
from app.ml.hyperparameters import HyperparameterRequest
from app.ml.pairs import QAPair
from app.ml.training.request import TrainingRequest
from app.ml.training.trainer import ModelTrainer, TrainingResult
from tests.conftest import cpu_plan, training_pairs

pytestmark = pytest.mark.slow
# fp32 sums the same per-example gradients in another order across two processes, so the
# gradients differ in their last bits; Adam divides each by its own running size, so for
# elements whose gradient is almost zero that noise becomes a visible step. Hence a bound
# on the whole adapter's difference (Frobenius norm), not on its largest element.
TOLERANCE = 1e-3  # of the adapter's norm


def train(
    tmp_path: Path,
    name: str,
    pairs: list[QAPair],
    model_cache: Path,
    **hyperparameters: object,
) -> tuple[TrainingResult, list[TrainingEvent]]:
    events: list[TrainingEvent] = []
    request = TrainingRequest(
        base_model="builtin:tiny",
        pairs=pairs,
        output_dir=tmp_path / name,
        model_cache_dir=model_cache,
        hyperparameters=HyperparameterRequest.model_validate(
            {"precision": "fp32", "batch_size": 4, **hyperparameters}
        ),
        device_plan=cpu_plan(),
        offline=True,
        cpu_threads=1,  # two processes on two cores
    )
    return ModelTrainer(request, on_event=events.append).run(), events


def weights(result: TrainingResult) -> dict[str, torch.Tensor]:
    return load_file(result.adapter_dir / "adapter_model.safetensors")


def test_two_processes_train_the_adapter_one_would(tmp_path: Path, model_cache: Path) -> None:
    pairs = training_pairs()[:8]
    one, _ = train(tmp_path, "one", pairs, model_cache, epochs=3, processes=1)
    two, events = train(tmp_path, "two", pairs, model_cache, epochs=3, processes=2)

    assert two.hyperparameters.processes == 2
    assert any("Data parallel: 2 processes (gloo)" in e.message.english() for e in events)
    assert two.metrics.train_steps == one.metrics.train_steps == 6
    assert two.metrics.train_tokens == one.metrics.train_tokens  # both processes' tokens
    assert two.metrics.train_loss == pytest.approx(one.metrics.train_loss, rel=1e-4)
    a, b = weights(one), weights(two)
    assert a.keys() == b.keys()
    difference = sum(((a[k] - b[k]) ** 2).sum().item() for k in a) ** 0.5
    size = sum((a[k] ** 2).sum().item() for k in a) ** 0.5
    assert difference <= TOLERANCE * size, f"{difference / size:.2e} of the adapter's norm"
    print(
        f"step time: 1 process {one.metrics.train_runtime_s / 6:.3f} s, "
        f"2 processes {two.metrics.train_runtime_s / 6:.3f} s; difference "
        f"{difference / size:.1e} of the adapter's norm"
    )


def test_auto_epochs_agree_across_processes(tmp_path: Path, model_cache: Path) -> None:
    """Which answers are learned is merged over both processes each epoch, so both end at
    the same step (neither waits on a collective the other skipped) and learn them all."""
    pairs = training_pairs()[:6]
    one, _ = train(tmp_path, "one", pairs, model_cache, processes=1)
    two, _ = train(tmp_path, "two", pairs, model_cache, processes=2)
    assert two.metrics.train_steps == one.metrics.train_steps
    assert two.metrics.train_exact_match == one.metrics.train_exact_match == 1.0


def test_a_cancel_stops_every_process(tmp_path: Path, model_cache: Path) -> None:
    """Rank 0 hears the cancel; every process stops at the same step and none is left."""
    import multiprocessing

    from app.ml.training.stops import TrainingCancelled

    asked = iter([None] * 5 + ["cancel"] * 1000)
    request = TrainingRequest(
        base_model="builtin:tiny",
        pairs=training_pairs()[:8],
        output_dir=tmp_path / "cancelled",
        model_cache_dir=model_cache,
        hyperparameters=HyperparameterRequest(epochs=50, batch_size=4, processes=2),
        device_plan=cpu_plan(),
        offline=True,
        cpu_threads=1,
    )
    with pytest.raises(TrainingCancelled):
        ModelTrainer(request, should_stop=lambda: next(asked)).run()  # type: ignore[arg-type]
    assert not multiprocessing.active_children()
    assert not (tmp_path / "cancelled").exists()
