"""ModelTrainer on the built-in model: real training, cancel, OOM back-off, offline hubs."""

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.ml import answer_loss
from app.ml.data import validation_indices
from app.ml.events import OutOfMemory, Progress, StopRequest, TrainingEvent
from app.ml.hyperparameters import HyperparameterRequest
from app.ml.models import ModelUnavailable
from app.ml.training.adapter_files import read_evaluation
from app.ml.training.adapter_metadata import read_adapter_metadata
from app.ml.training.request import StartAdapter, TrainingRequest
from app.ml.training.stops import TrainingCancelled, TrainingFailed
from app.ml.training.trainer import ModelTrainer
from tests.conftest import cpu_plan, training_pairs

pytestmark = pytest.mark.slow  # every test trains

PAIRS = training_pairs()


def request(tmp_path: Path, model_cache: Path, **hyperparameters: Any) -> TrainingRequest:
    return TrainingRequest(
        base_model="builtin:tiny",
        pairs=PAIRS[:12],
        output_dir=tmp_path / "adapter",
        model_cache_dir=model_cache,
        hyperparameters=HyperparameterRequest.model_validate(hyperparameters),
        device_plan=cpu_plan(),
        offline=True,
    )


class Events(list[TrainingEvent]):
    def __call__(self, event: TrainingEvent) -> None:
        self.append(event)

    def kinds(self) -> list[str]:
        return [event.data.kind for event in self if event.data is not None]

    def topics(self) -> list[str]:
        return [getattr(event.data, "topic", "") for event in self]


def test_a_short_run_saves_a_complete_adapter(tmp_path: Path, model_cache: Path) -> None:
    events = Events()
    result = ModelTrainer(
        request(tmp_path, model_cache, max_steps=4, validation_split=0.25), on_event=events
    ).run()
    metrics = result.metrics
    assert metrics.train_steps == 4 and metrics.train_tokens > 0
    # one step after the warm-up ones: the steady rate counts that step's tokens alone
    assert metrics.steady_tokens_per_second is not None and metrics.steady_tokens_per_second > 0
    assert metrics.train_loss is not None and 0 < metrics.train_loss < 10
    assert metrics.device == "cpu" and metrics.eval_exact_match is not None
    assert read_adapter_metadata(result.adapter_dir).base_model == "builtin:tiny"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left
    kinds = events.kinds()
    for kind in ("memory", "device", "plan", "start", "progress", "eval"):
        assert kind in kinds
    assert "saved" in events.topics()
    progress = [e.data for e in events if isinstance(e.data, Progress)]
    assert progress[-1].step == 4 and progress[-1].eta_seconds == 0


def test_cancel_stops_between_batches_and_saves_nothing(tmp_path: Path, model_cache: Path) -> None:
    started = time.monotonic()
    calls = {"n": 0}

    def stop_after_two() -> StopRequest | None:
        calls["n"] += 1
        return "cancel" if calls["n"] > 2 else None

    with pytest.raises(TrainingCancelled):
        ModelTrainer(request(tmp_path, model_cache, epochs=50), should_stop=stop_after_two).run()
    assert time.monotonic() - started < 30
    assert not (tmp_path / "adapter").exists()


def test_out_of_memory_halves_the_micro_batch_then_checkpoints(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_loss = answer_loss.answer_loss_sum
    budget = {"tokens": 300, "faults": 0}

    def fake_oom(model: Any, batch: Any, hits: Any = None) -> Any:
        # Inject the CPU allocator's error for micro-batches over the budget.
        if batch.computed_tokens > budget["tokens"]:
            budget["faults"] += 1
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to ...")
        return real_loss(model, batch, hits)

    monkeypatch.setattr("app.ml.training.judging.answer_loss_sum", fake_oom)
    events = Events()
    result = ModelTrainer(
        request(tmp_path, model_cache, max_steps=2, batch_size=8), on_event=events
    ).run()
    ooms = [e.data for e in events if isinstance(e.data, OutOfMemory)]
    assert ooms and budget["faults"] == len(ooms)
    tokens = [oom.micro_batch_tokens for oom in ooms]
    assert tokens == sorted(tokens, reverse=True) and tokens[-1] <= 512  # halved until it fit
    assert result.metrics.train_steps == 2  # the effective batch was kept
    assert result.metrics.steady_tokens_per_second is None  # no step after the warm-up


def test_persistent_out_of_memory_fails_with_numbers_and_advice(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def always_oom(model: Any, batch: Any, hits: Any = None) -> Any:
        raise RuntimeError("MPS backend out of memory (MPS allocated: 9 GB)")

    monkeypatch.setattr("app.ml.training.judging.answer_loss_sum", always_oom)
    events = Events()
    with pytest.raises(TrainingFailed, match="Out of memory.*smaller base model"):
        ModelTrainer(request(tmp_path, model_cache, max_steps=2), on_event=events).run()
    messages = [e.message.english() for e in events if isinstance(e.data, OutOfMemory)]
    assert any("gradient checkpointing on" in m for m in messages)


def test_unknown_hub_model_fails_fast_offline(tmp_path: Path, model_cache: Path) -> None:
    started = time.monotonic()
    req = replace(request(tmp_path, model_cache), base_model="Qwen/Qwen2.5-0.5B-Instruct")
    with pytest.raises(ModelUnavailable, match="Qwen/Qwen2.5-0.5B-Instruct.*builtin:tiny"):
        ModelTrainer(req).run()
    assert time.monotonic() - started < 10


def test_unknown_hub_model_fails_fast_with_no_network(tmp_path: Path, model_cache: Path) -> None:
    started = time.monotonic()
    req = replace(request(tmp_path, model_cache), base_model="someone/not-a-cached-model")
    req = replace(req, offline=False)
    with pytest.raises(ModelUnavailable, match="not cached"):
        ModelTrainer(req).run()
    assert time.monotonic() - started < 60


def test_metadata_records_what_was_trained(tmp_path: Path, model_cache: Path) -> None:
    result = ModelTrainer(request(tmp_path, model_cache, max_steps=1, lora_r=4)).run()
    meta = json.loads((result.adapter_dir / "qatune_adapter.json").read_text())
    assert meta["hyperparameters"]["lora_r"] == 4
    assert (result.adapter_dir / "adapter_model.safetensors").stat().st_size > 0


def test_validation_scores_each_epoch_and_the_table_compares_with_the_base(
    tmp_path: Path, model_cache: Path
) -> None:
    events = Events()
    result = ModelTrainer(
        request(tmp_path, model_cache, epochs=3, validation_split=0.25), on_event=events
    ).run()
    validated = [e.data for e in events if e.data is not None and e.data.kind == "validated"]
    assert [v.epoch for v in validated] == [1, 2, 3]
    report = read_evaluation(result.adapter_dir)
    assert report is not None and report.split == "validation" and report.questions == 3
    held_out = validation_indices(12, 0.25, seed=42)
    assert [r.question for r in report.rows] == [PAIRS[i].question for i in sorted(held_out)]
    assert report.kept_epoch is not None and "kept" in report.kept_reason
    assert result.metrics.eval_exact_match == report.exact_match
    assert all(row.base != row.expected for row in report.rows)


@pytest.mark.serial  # a wall-clock limit: another test beside it changes what fits
def test_a_time_limit_settles_auto_epochs_and_ends_training(
    tmp_path: Path, model_cache: Path
) -> None:
    events = Events()
    limit_s = 1.5
    result = ModelTrainer(
        request(tmp_path, model_cache, max_minutes=limit_s / 60), on_event=events
    ).run()
    messages = " ".join(e.message.english() for e in events)
    assert "Near the time limit" in messages
    # It stops at the limit (give or take a step), long before its cap of epochs.
    assert limit_s * 0.85 <= result.metrics.train_runtime_s < limit_s + 2
    assert result.metrics.epochs < result.hyperparameters.epochs


def test_the_run_fits_its_scope_after_the_answer_table(tmp_path: Path, model_cache: Path) -> None:
    """The answer table serves the base with the run's adapter kept apart from the model
    (the serving bank's); afterwards the run's model has its adapter back, so that the
    scope reads the base with it switched off, and the scope is saved with the adapter."""
    events = Events()
    result = ModelTrainer(
        request(tmp_path, model_cache, max_steps=4, scope="true"), on_event=events
    ).run()
    assert "answer_table" in events.topics()
    assert (result.adapter_dir / "scope.safetensors").is_file()


def test_a_base_is_asked_its_general_questions_once(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new adapter starts as its base, so the next job on that base reads what the first
    one asked (minutes on a real model); a model trained further is asked itself."""
    from app.ml.training import forgetting

    asked: list[str] = []
    ask = forgetting.what_it_knows

    def counted(*args: Any, **kwargs: Any) -> Any:
        asked.append("asked")
        return ask(*args, **kwargs)

    monkeypatch.setattr(forgetting, "what_it_knows", counted)
    first = replace(request(tmp_path, model_cache, max_steps=1), base_answers_dir=tmp_path / "kept")
    ModelTrainer(first).run()
    assert asked == ["asked"] and len(list((tmp_path / "kept").glob("knowledge-*.json"))) == 1
    ModelTrainer(replace(first, output_dir=tmp_path / "second")).run()
    assert asked == ["asked"]
    further = replace(
        first, output_dir=tmp_path / "third", start=StartAdapter(tmp_path / "adapter", "first")
    )
    ModelTrainer(further).run()
    assert asked == ["asked", "asked"]
