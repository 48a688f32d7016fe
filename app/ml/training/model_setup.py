"""The model a run trains: the frozen base in the training precision, LoRA on top, our
fused LoRA layers, and varlen attention where the architecture takes it."""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from app.core.language import said, tr
from app.ml.events import Note, TrainingEvent
from app.ml.fused import fuse_lora
from app.ml.hyperparameters import ResolvedHyperparameters
from app.ml.memory import release_memory
from app.ml.models import load_causal_lm
from app.ml.precision import DTYPES
from app.ml.quantization import (
    LABELS,
    Quantization,
    keeps_inputs_from_checkpointing,
    quantized_layers,
)
from app.ml.training.request import StartAdapter


class LoraSetupFailed(ValueError):
    """peft refused the LoRA configuration (e.g. target modules the model does not have)."""


@dataclass
class TrainableModel:
    model: Any  # peft's PeftModel
    flat: bool  # examples go in flat rows with varlen attention (else rows with a 4D mask)
    quantized: bool = False  # the base's linear layers are 8- or 4-bit: never merge into them


def load_trainable_model(
    model_dir: Path,
    *,
    device: str,
    precision: str,
    params: ResolvedHyperparameters,
    emit: Callable[[TrainingEvent], None],
    start: StartAdapter | None = None,
) -> TrainableModel:
    from peft import LoraConfig, get_peft_model

    from app.ml.varlen_attention import enable_varlen

    # The frozen base is stored in the training precision (no per-step casts of the
    # weights), or its linear layers quantized (QLoRA); the LoRA weights stay fp32 (peft's
    # autocast_adapter_dtype), over bitsandbytes' layers too.
    quantization = cast(Quantization, params.quantization)
    model = load_causal_lm(
        model_dir, dtype=DTYPES[precision], device=device, quantization=quantization
    )
    model.config.use_cache = False
    if quantization != "none" and not quantized_layers(model):
        emit(
            TrainingEvent(
                "WARNING",
                said(
                    "No layer of this model could be stored in {label} (it has no plain linear "
                    "layers bitsandbytes takes): the base trains as stored",
                    label=LABELS[quantization],
                ),
                Note(topic="quantization", values={"quantization": "none"}),
            )
        )
        quantization = "none"
    lora = LoraConfig(
        r=params.lora_r,
        lora_alpha=params.lora_alpha,
        lora_dropout=params.lora_dropout,
        target_modules=params.lora_target_modules,
        task_type="CAUSAL_LM",
    )
    try:
        peft_model = get_peft_model(model, lora)
    except ValueError as exc:
        raise LoraSetupFailed(tr("LoRA target modules: {exc}", exc=exc)) from exc
    if start is not None:  # a resumed run then loads its checkpoint over these weights
        _load_weights(peft_model, start.path)
        emit(
            TrainingEvent(
                "INFO",
                said("Starting from {model}: its adapter is trained further", model=start.model),
                Note(topic="start", values={"started_from": start.model}),
            )
        )
    fused = fuse_lora(peft_model)
    emit(
        TrainingEvent(
            "INFO",
            said(
                "Fused LoRA linear layers: {fused} (base matmul and rank-{rank} update in one op)",
                fused=fused,
                rank=params.lora_r,
            ),
            Note(topic="fused", values={"fused_lora_layers": fused}),
        )
    )
    flat = enable_varlen(peft_model)
    # Quantizing the base, and the varlen probe's forwards over it, free their transient
    # copies of each weight into the heap in pieces glibc keeps: ~1 GB on Qwen2.5-3B's
    # shape in 4-bit (docs/benchmarks.md). Back to the OS before the loop keeps its own.
    release_memory(device)
    why = said(
        "one row of real tokens, attention per example (no padding)"
        if flat
        else "rows with a block-diagonal mask (this architecture takes no varlen attention)"
    )
    packing = said("Packing: {why}", why=why)
    emit(TrainingEvent("INFO", packing, Note(topic="packing", values={"flat": flat})))
    if quantization != "none":
        emit(
            TrainingEvent(
                "INFO",
                said(
                    "Base in {label}: its linear layers quantized by bitsandbytes, computing in "
                    "{precision}",
                    label=LABELS[quantization],
                    precision=precision,
                ),
                Note(topic="quantization", values={"quantization": quantization}),
            )
        )
    trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in peft_model.parameters())
    emit(
        TrainingEvent(
            "INFO",
            said(
                "LoRA r={rank} alpha={alpha} on {modules}: {trainable:,} trainable of {total:,} "
                "parameters",
                rank=params.lora_r,
                alpha=params.lora_alpha,
                modules=str(params.lora_target_modules),
                trainable=trainable,
                total=total,
            ),
            Note(topic="model", values={"trainable_params": trainable, "total_params": total}),
        )
    )
    return TrainableModel(peft_model, flat, quantized=quantization != "none")


def serving_weights(trainable: TrainableModel, merged: bool) -> Any:
    """The run's model as a plain transformers model for the serving engine: the adapter
    merged into the base weights, or taken off (stage the adapter first); in eval mode with
    its KV cache on. Varlen attention without sequence lengths is plain SDPA, so it stays.
    The run's model is not usable for training after this."""
    base = trainable.model.merge_and_unload() if merged else trainable.model.unload()
    base.config.use_cache = True
    return base.eval()


def adapter_back(trainable: TrainableModel, adapter_dir: Path, merged: bool) -> None:
    """After the answer table served the base with the run's adapter from its files (not
    merged): the adapter back in the run's model, from the same files, for what the run
    asks after the table (its scope, what it kept). Serving keeps an adapter's weights
    apart from the model (lora_bank.py), so the table leaves the base bare."""
    if merged:
        return
    import torch
    from peft import PeftModel

    base = trainable.model.get_base_model()  # the run's model wraps this same module tree
    with torch.inference_mode(False):
        PeftModel.from_pretrained(base, adapter_dir, adapter_name="tuned", is_trainable=False)
    base.eval()


def enable_checkpointing(model: Any) -> None:
    """Recompute activations in the backward pass instead of keeping them.

    Non-reentrant checkpointing drops what autograd saves, but bitsandbytes' 8-bit matmuls
    keep their input on their autograd context instead, so over an 8-bit base every layer's
    linear inputs stayed (on an H100, 0.95 of a 3B-shape step's 1.39 GB). Reentrant
    checkpointing runs the first forward without autograd, where they keep nothing."""
    base = model.get_base_model()
    options = {"use_reentrant": keeps_inputs_from_checkpointing(base)}
    if hasattr(base, "activation_checkpointing_enable"):  # transformers ≥ 5.x name
        base.activation_checkpointing_enable(options)
    else:
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs=options)
    model.enable_input_require_grads()  # reentrant checkpointing needs an input with grad


def _load_weights(model: Any, adapter_dir: Path) -> None:
    """Load a trained adapter's weights into the new one (same rank, alpha and layers)."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    device = next(p.device for p in model.parameters())
    weights = load_file(adapter_dir / "adapter_model.safetensors", device=str(device))
    loaded: Any = set_peft_model_state_dict(model, weights)  # torch's (missing, unexpected)
    absent, unexpected = loaded
    missing = [key for key in absent if "lora_" in key]
    if missing or unexpected:
        raise LoraSetupFailed(
            tr(
                "the starting adapter does not fit this model's LoRA layers ({count} missing, "
                "{unexpected} unexpected weights)",
                count=len(missing),
                unexpected=len(unexpected),
            )
        )
