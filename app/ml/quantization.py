"""A quantized frozen base (QLoRA): which kinds a device can train with, what they cost in
memory, and how the base is loaded.

The base's linear layers are stored in 8-bit (LLM.int8) or 4-bit (NF4 with double
quantization) by bitsandbytes, which has kernels for CUDA, the CPU and Apple's MPS
(docs/devices.md says why it serves all three); the embeddings, norms and LM head stay in
the training precision, and so do the LoRA adapter and its optimizer (peft's LoRA layers
over bitsandbytes' ones; over 4-bit ones, qatune's fused op, fused.py). The decisions
(`support_for`, `QuantizationSupport`, `base_weight_bytes`) are pure, so the planner,
the estimates and the fit check decide without importing the library; the rest is what
loading a quantized base needs.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Literal

from app.core.language import tr

Quantization = Literal["none", "8bit", "4bit"]
QuantizationRequest = Literal["auto", "none", "8bit", "4bit"]
# Tried in this order when the 16-bit base does not fit: 8-bit loses less than 4-bit.
QUANTIZED: tuple[Quantization, ...] = ("8bit", "4bit")
MIN_BITSANDBYTES = (0, 50)  # CPU kernels for both kinds, and the MPS backend
INSTALL = "pip install 'bitsandbytes>=0.50'"
MIN_TORCH_FOR_MPS = (2, 9)
# bitsandbytes' 4-bit layout with double quantization: two weights a byte, one 8-bit
# absmax per block of 64 weights, and an fp32 scale per 256 of those blocks.
BLOCK = 64
BYTES_PER_WEIGHT: dict[Quantization, float] = {
    "8bit": 1 + 4 / 4096,  # int8 weights and an fp32 scale per output row (~4096 wide)
    "4bit": 0.5 + 1 / BLOCK + 4 / (BLOCK * 256),
}
LABELS: dict[Quantization, str] = {"none": "as stored", "8bit": "8-bit", "4bit": "4-bit (NF4)"}


class QuantizationUnavailable(ValueError):
    """The quantization asked for cannot be done here; the message says what to choose."""


@dataclass(frozen=True)
class QuantizationSupport:
    """The kinds of quantized base this process can train with, and why not if none."""

    kinds: tuple[Quantization, ...]
    why_not: str | None = None

    def check(self, kind: str, *, device: str, processes: int = 1) -> None:
        if kind in ("auto", "none"):
            return
        if processes > 1:
            raise QuantizationUnavailable(
                tr(
                    "a {kind} base cannot be trained by {processes} processes together (data "
                    "parallel): set processes to 1, or quantization to none",
                    kind=kind,
                    processes=processes,
                )
            )
        if kind not in self.kinds:
            raise QuantizationUnavailable(
                tr(
                    "{kind} is not available on {device}: {why_not}; or set quantization to "
                    "none (or auto, which quantizes only where it can)",
                    kind=kind,
                    device=device,
                    why_not=self.why_not,
                )
            )


def bitsandbytes_version() -> tuple[int, int] | None:
    """The installed bitsandbytes' (major, minor), read without importing it."""
    try:
        major, minor, *_ = version("bitsandbytes").split(".")
        return int(major), int("".join(c for c in minor if c.isdigit()) or 0)
    except (PackageNotFoundError, ValueError):
        return None


def support_for(
    device: str, *, torch_version: tuple[int, int], library: tuple[int, int] | None
) -> QuantizationSupport:
    """What a device can train on, given torch's and bitsandbytes' versions (None: absent)."""
    if library is None:
        return QuantizationSupport((), f"bitsandbytes is not installed ({INSTALL})")
    if library < MIN_BITSANDBYTES:
        found = ".".join(map(str, library))
        return QuantizationSupport((), f"bitsandbytes {found} is too old ({INSTALL})")
    if device == "mps" and torch_version < MIN_TORCH_FOR_MPS:
        need = ".".join(map(str, MIN_TORCH_FOR_MPS))
        return QuantizationSupport((), f"bitsandbytes on MPS needs torch ≥ {need}")
    return QuantizationSupport(QUANTIZED)


def base_weight_bytes(
    linear_params: int, other_params: int, precision_bytes: int, kind: Quantization
) -> float:
    """The frozen base's bytes: its linear layers quantized (or not), the rest as they are."""
    if kind == "none":
        return (linear_params + other_params) * precision_bytes
    return linear_params * BYTES_PER_WEIGHT[kind] + other_params * precision_bytes


def load_options(kind: Quantization, *, dtype: Any, device: str) -> dict[str, Any]:
    """from_pretrained's arguments for a quantized base on `device` ({} for none)."""
    if kind == "none":
        return {}
    import torch
    from transformers import BitsAndBytesConfig

    if kind == "4bit":
        config = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=dtype,
        )
    else:
        config = BitsAndBytesConfig(load_in_8bit=True)
    place: Any = torch.cuda.current_device() if device == "cuda" else device
    # Quantized weights are made on the device they load to: they cannot be moved after.
    return {"quantization_config": config, "device_map": {"": place}}


@contextmanager
def source_pages_released() -> Iterator[None]:
    """While transformers quantizes a checkpoint, give each source weight's pages back as
    soon as its quantized copy exists. The checkpoint is mapped from disk: without this,
    every page read stays in the process until the load ends, so loading a 4-bit base
    peaked at the whole checkpoint's size (measured: 2.1 GB for the 0.5B shape's 2 GB in
    fp32, where its 4-bit weights take 0.7). Where transformers' bitsandbytes operations
    are not found, the load is the same, only its peak higher."""
    from app.ml.memory import page_out  # (torch: not for the API process's import)

    try:
        from transformers.integrations import bitsandbytes as integration
    except ImportError:
        yield
        return
    operations = [getattr(integration, n, None) for n in ("Bnb4bitQuantize", "Bnb8bitQuantize")]
    patched = [op for op in operations if op is not None and hasattr(op, "convert")]
    originals = {op: op.convert for op in patched}

    def releasing(original: Any) -> Any:
        def convert(self: Any, input_dict: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            result = original(self, input_dict, *args, **kwargs)
            for value in input_dict.values():
                for tensor in value if isinstance(value, list) else [value]:
                    page_out(tensor)
            return result

        return convert

    for op in patched:
        op.convert = releasing(originals[op])
    try:
        yield
    finally:
        for op, original in originals.items():
            op.convert = original


def quantized_layers(model: Any) -> int:
    """How many of the model's layers bitsandbytes holds (Linear8bitLt, Linear4bit)."""
    return sum(type(m).__module__.startswith("bitsandbytes") for m in model.modules())


def keeps_inputs_from_checkpointing(model: Any) -> bool:
    """Has the model bitsandbytes' 8-bit layers? Their matmul keeps its input on its autograd
    context, where non-reentrant checkpointing cannot drop it."""
    return any(
        type(m).__name__ == "Linear8bitLt" and type(m).__module__.startswith("bitsandbytes")
        for m in model.modules()
    )


def quiet_library_warnings() -> None:
    """LLM.int8 on a CPU logs on every matmul that it casts its inputs to fp16: once is
    enough, and the plan's reasons already say what runs where."""
    import logging

    logging.getLogger("bitsandbytes.autograd._functions").addFilter(_ONCE)  # added once


class _Once:
    """A logging filter that lets each message through the first time only."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def filter(self, record: Any) -> bool:
        first = record.msg not in self.seen
        self.seen.add(record.msg)
        return first


_ONCE = _Once()
