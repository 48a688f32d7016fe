"""Training on a quantized base (QLoRA) with bitsandbytes on the CPU, on the built-in model:
it learns, its table runs on the quantized weights, it pauses and resumes, and what it
saves says how it was trained."""

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from safetensors.torch import load_file

from app.ml.events import TrainingEvent
from app.ml.hyperparameters import HyperparameterRequest
from app.ml.training.adapter_files import read_evaluation
from app.ml.training.adapter_metadata import read_adapter_metadata
from app.ml.training.checkpoints import latest_checkpoint
from app.ml.training.request import TrainingRequest
from app.ml.training.stops import TrainingPaused
from app.ml.training.trainer import ModelTrainer
from tests.conftest import cpu_plan, training_pairs

pytestmark = pytest.mark.slow  # every test trains

if not cpu_plan().quantization.kinds:
    pytest.skip("bitsandbytes is not installed", allow_module_level=True)


def request(tmp_path: Path, model_cache: Path, name: str, **asked: object) -> TrainingRequest:
    return TrainingRequest(
        base_model="builtin:tiny",
        pairs=training_pairs()[:8],
        output_dir=tmp_path / name / "adapter",
        model_cache_dir=model_cache,
        hyperparameters=HyperparameterRequest.model_validate(asked),
        device_plan=cpu_plan(),
        offline=True,
        checkpoint_dir=tmp_path / name / "checkpoints",
    )


def test_a_4bit_base_learns_every_answer_and_the_adapter_says_how(
    tmp_path: Path, model_cache: Path
) -> None:
    events: list[TrainingEvent] = []
    run = request(tmp_path, model_cache, "nf4", quantization="4bit", seed=3)
    result = ModelTrainer(run, on_event=events.append).run()
    assert result.metrics.train_exact_match == 1.0
    assert result.hyperparameters.quantization == "4bit"
    messages = [event.message.english() for event in events]
    assert any(m.startswith("Base in 4-bit (NF4): its linear layers quantized") for m in messages)
    assert any("4-bit (NF4) base); micro-batch" in m for m in messages)  # the plan's summary
    # The table decoded on the quantized weights, the adapter unmerged: the same answers.
    evaluation = read_evaluation(result.adapter_dir)
    assert evaluation is not None and evaluation.unfinished == 0
    assert evaluation.exact_match == 1.0
    metadata = read_adapter_metadata(result.adapter_dir)
    assert metadata.quantization == "4bit"
    card = (result.adapter_dir / "README.md").read_text()
    assert "| base weights in training | 4-bit (NF4) (QLoRA, bitsandbytes)" in card
    # Served on the base quantized as it was trained: the answer it learned, exactly.
    pair = run.pairs[0]
    data_dir = tmp_path / "service"
    data_dir.mkdir()
    (data_dir / "models").symlink_to(model_cache)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("QATUNE_")}
    asked = subprocess.run(
        [sys.executable, "-m", "app.cli", "ask", "--adapter", str(result.adapter_dir)]
        + [pair.question],
        env={**environment, "QATUNE_DATA_DIR": str(data_dir), "QATUNE_OFFLINE": "true"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.strip() == pair.answer.strip()


def test_an_8bit_run_paused_and_resumed_ends_where_an_uninterrupted_one_does(
    tmp_path: Path, model_cache: Path
) -> None:
    asked = {"quantization": "8bit", "epochs": 3, "batch_size": 4, "lora_r": 8, "seed": 7}
    whole = ModelTrainer(request(tmp_path, model_cache, "whole", **asked)).run()

    calls = {"n": 0}

    def pause_after_three() -> str | None:
        calls["n"] += 1
        return "pause" if calls["n"] > 3 else None

    paused = request(tmp_path, model_cache, "paused", **asked)
    with pytest.raises(TrainingPaused):
        ModelTrainer(paused, should_stop=pause_after_three).run()  # type: ignore[arg-type]
    saved = latest_checkpoint(paused.checkpoint_dir)  # type: ignore[arg-type]
    assert saved is not None
    resumed = ModelTrainer(replace(paused, resume_from=saved)).run()
    assert resumed.metrics.final_loss == pytest.approx(whole.metrics.final_loss, rel=1e-3)
    want = load_file(whole.adapter_dir / "adapter_model.safetensors")
    got = load_file(resumed.adapter_dir / "adapter_model.safetensors")
    # LLM.int8 on a CPU rounds activations to fp16 and sums in an order that follows the
    # thread count, which the CPU share sets per run: the same weights, to that rounding.
    for name in want:
        assert (want[name] - got[name]).norm() <= 0.01 * want[name].norm(), name


def _inputs_held_by_the_graph(loss: Any) -> int:
    """Tensors the backward graph holds as attributes of bitsandbytes' autograd contexts
    (where checkpointing cannot drop them: `ctx.A`, `ctx.tensors`)."""
    import torch

    held, seen, todo = 0, set(), [loss.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for name in ("A", "tensors"):
            value = getattr(node, name, None)
            values = value if isinstance(value, (tuple, list)) else [value]
            held += sum(isinstance(v, torch.Tensor) for v in values)
        todo.extend(next_node for next_node, _ in node.next_functions)
    return held


@pytest.mark.parametrize("way", ["qatune", "non-reentrant"])
def test_checkpointing_an_8bit_base_keeps_no_layer_s_inputs(model_cache: Path, way: str) -> None:
    """bitsandbytes' 8-bit matmuls keep their inputs on their autograd context, out of reach
    of non-reentrant checkpointing (every layer's linear inputs stayed until the backward:
    0.95 of a 3B-shape step's 1.39 GB on an H100); qatune checkpoints an 8-bit base the
    reentrant way, whose first forward builds no such context. (`non-reentrant`: what
    non-reentrant checkpointing holds, so that the count is seen to be able to fail.)"""
    import torch
    from peft import LoraConfig, get_peft_model

    from app.ml.builtin import ensure_builtin_model
    from app.ml.models import load_causal_lm
    from app.ml.quantization import keeps_inputs_from_checkpointing
    from app.ml.training.model_setup import enable_checkpointing

    base = load_causal_lm(
        ensure_builtin_model(model_cache), dtype=torch.float32, device="cpu", quantization="8bit"
    )
    assert keeps_inputs_from_checkpointing(base)
    model = get_peft_model(base, LoraConfig(r=4, target_modules="all-linear"))
    if way == "qatune":
        enable_checkpointing(model)
    else:
        base.activation_checkpointing_enable({"use_reentrant": False})
        model.enable_input_require_grads()
    model.train()
    ids = torch.randint(5, 200, (2, 24))
    loss = model(input_ids=ids, labels=ids).loss
    held = _inputs_held_by_the_graph(loss)
    layers = base.config.num_hidden_layers
    if way == "qatune":
        assert held == 0
        loss.backward()  # and the recompute gives the LoRA weights their gradients
        grads = [p.grad for n, p in model.named_parameters() if "lora_B" in n]
        assert grads and all(g is not None and g.abs().sum() > 0 for g in grads)
    else:
        assert held >= 7 * layers  # q, k, v, o, gate, up, down in each layer
