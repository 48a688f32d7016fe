"""The loaded adapters' LoRA weights, side by side, and how a step's rows run with them.

Every linear layer an adapter targets gets one forward, installed when the first adapter
that targets it loads: its base layer's output, plus what the step asks for:

- nothing: rows of the bare base, or of an adapter merged into the base weights. A step
  whose rows all use one adapter runs it merged, so it costs what the bare model does
  (unmerged, every LoRA linear adds two small matmuls: on a small model that is most of a
  decode step). Unmerging restores saved copies of the base weights exactly; subtracting
  the delta again would drift in bf16. The copies cost the targeted weights' bytes once,
  so merging is used only where they fit `merge_budget_bytes` and the weights are plain
  floats (a quantized weight is stored packed).
- each row's own delta ("stacked"), from the adapters' weights side by side (A of every
  adapter in the step as one matrix, B likewise, scaling folded into B): x·A_step, each
  row's columns of the other adapters zeroed, ·B_step. Two plain matmuls and a multiply
  whatever the mix, where gathering each row's own A and B (the gather-and-bmm of LoRAX's
  and vLLM's kernels) copies both per row and layer, and a forward hook to add it puts
  every call on torch's slow path: a step of 8 rows over 4 adapters of the built-in model,
  7.2 ms this way against 8.7 ms gathered (bench/serve_throughput.py); peft's own per-row
  `adapter_names` loops over the adapters in Python in every layer: 25 ms.

The weights are the bank's, not peft's. Loading into peft walks every module of the model,
the other adapters' included, and every load restacked every adapter: with 4 adapters
loaded a load took 0.07 s, with 40 0.41 s, and each switch walked all modules again. Here
an adapter is read and laid out off the engine thread (`read_lora`), and adding it writes
one slot of each stack: the same cost with 2 adapters loaded or 200. A freed slot is
reused; the stacks grow by doubling; a step takes only its own adapters' slots.
"""

import json
import math
import re
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch

from app.core.language import tr
from app.ml.training.adapter_metadata import AdapterInvalid

BASE = "__base__"  # the key of rows without an adapter
_KEY = re.compile(r"^(?:base_model\.model\.)?(.+)\.lora_([AB])\.weight$")
# adapter_config.json fields of LoRA variants whose forward is not x·A·B·scaling
_VARIANTS = (
    "use_dora",
    "modules_to_save",
    "lora_bias",
    "fan_in_fan_out",
    "alpha_pattern",
    "layer_replication",
    "trainable_token_indices",
    "target_parameters",
    "use_qalora",
    "alora_invocation_tokens",
)


@dataclass(frozen=True)
class LoraWeights:
    """One adapter as the bank takes it: per layer name, A as (r, in) and B as (r, out) with
    the scaling folded into B, in the serving dtype."""

    layers: dict[str, tuple[torch.Tensor, torch.Tensor]]

    @property
    def bytes(self) -> int:
        return sum(
            a.numel() * a.element_size() + b.numel() * b.element_size()
            for a, b in self.layers.values()
        )


def read_lora(directory: Path, dtype: torch.dtype) -> LoraWeights:
    """A peft LoRA adapter's files, laid out for the bank (AdapterInvalid for another kind
    of adapter). Any thread: no model is touched."""
    from safetensors.torch import load_file

    config = json.loads((directory / "adapter_config.json").read_text())
    if config.get("peft_type", "LORA") != "LORA":
        raise AdapterInvalid(tr("Not a LoRA adapter: {kind}", kind=config.get("peft_type")))
    if config.get("bias", "none") != "none":
        raise AdapterInvalid(tr("The adapter trains biases, which serving here does not run"))
    for variant in _VARIANTS:
        if config.get(variant):
            raise AdapterInvalid(
                tr("The adapter uses {variant}, which serving here does not run", variant=variant)
            )
    alpha, rslora = float(config["lora_alpha"]), bool(config.get("use_rslora"))
    halves: dict[str, dict[str, torch.Tensor]] = {}
    for key, tensor in load_file(directory / "adapter_model.safetensors").items():
        match = _KEY.match(key)
        if match is None:
            raise AdapterInvalid(tr("The adapter holds {key}, not a LoRA weight", key=key))
        halves.setdefault(match.group(1), {})[match.group(2)] = tensor
    layers = {}
    for name, pair in halves.items():
        if set(pair) != {"A", "B"}:
            raise AdapterInvalid(tr("The adapter's layer {name} lacks A or B", name=name))
        a, b = pair["A"], pair["B"]  # (r, in), (out, r)
        rank = a.shape[0]
        if a.dim() != 2 or b.dim() != 2 or b.shape[1] != rank or rank == 0:
            raise AdapterInvalid(tr("The adapter's layer {name} has bad shapes", name=name))
        # peft's scaling; a rank_pattern's rank is the tensors' own
        scaling = alpha / math.sqrt(rank) if rslora else alpha / rank
        layers[name] = (a.to(dtype).contiguous(), (b.t().float() * scaling).to(dtype).contiguous())
    if not layers:
        raise AdapterInvalid(tr("The adapter has no LoRA weights"))
    return LoraWeights(layers)


class BankLayer:
    """One targeted linear layer: its own forward, and every slot's A as (slot, r, in) and
    B as (slot, r, out). A slot is contiguous in both: writing one costs the same however
    many slots there are (slot-minor, each of its rows was a stride of all the others)."""

    def __init__(self, module: Any, capacity: int, dtype: torch.dtype) -> None:
        self.module = module
        self.base_forward = type(module).forward.__get__(module)
        # the layer's sizes, not its weight's shape: a quantized weight is stored packed
        self.size_in, self.size_out = module.in_features, module.out_features
        self.device = next(module.parameters()).device
        self.a = torch.zeros(capacity, 0, self.size_in, dtype=dtype, device=self.device)
        self.b = torch.zeros(capacity, 0, self.size_out, dtype=dtype, device=self.device)

    @property
    def rank(self) -> int:
        return self.a.shape[1]

    def put(self, slot: int, a: torch.Tensor, b: torch.Tensor) -> None:
        rank = a.shape[0]
        if a.shape[1] != self.size_in or b.shape[1] != self.size_out:
            raise AdapterInvalid(tr("The adapter's layer sizes do not fit the model"))
        if rank > self.rank:  # a larger rank than any before: pad the others'
            more = rank - self.rank
            self.a = torch.nn.functional.pad(self.a, (0, 0, 0, more))
            self.b = torch.nn.functional.pad(self.b, (0, 0, 0, more))
        self.clear(slot)
        self.a[slot, :rank] = a.to(self.device)
        self.b[slot, :rank] = b.to(self.device)

    def clear(self, slot: int) -> None:
        self.a[slot].zero_()
        self.b[slot].zero_()

    def grow(self, capacity: int) -> None:
        more = capacity - self.a.shape[0]
        self.a = torch.nn.functional.pad(self.a, (0, 0, 0, 0, 0, more))
        self.b = torch.nn.functional.pad(self.b, (0, 0, 0, 0, 0, more))

    def delta(self, slot: int) -> torch.Tensor:
        """The slot's update to the weight, (out, in), in float32."""
        return self.b[slot].float().t() @ self.a[slot].float()


class LoraBank:
    """Adapters by key on one base model. Used on the engine's thread only."""

    def __init__(
        self, model: Any, *, merge_budget_bytes: int, device: str, dtype: torch.dtype
    ) -> None:
        self.device = device
        self.dtype = dtype
        self.merge_budget_bytes = merge_budget_bytes
        self.merged: str | None = None
        self.layers: dict[str, BankLayer] = {}  # layer name → it, once an adapter targets it
        self._modules = dict(model.named_modules())  # the base's own, walked once
        self._slots: dict[str, int] = {}  # adapter key → its slot in every stack
        self._targets: dict[str, list[str]] = {}  # adapter key → the layers it targets
        self._free: list[int] = []
        self.capacity = 0
        self._saved: dict[str, torch.Tensor] = {}  # layer name → its pristine base weight
        self._step: StackedStep | None = None  # while stacked: the step's rows by slot

    @property
    def keys(self) -> list[str]:
        return list(self._slots)

    @torch.inference_mode(False)  # normal tensors: they outlive this step, and change
    def add(self, key: str, weights: LoraWeights) -> None:
        """Write the adapter's weights into a slot of each layer it targets."""
        unknown = [name for name in weights.layers if name not in self._modules]
        if unknown:
            raise AdapterInvalid(
                tr("The adapter targets {name}, which this model does not have", name=unknown[0])
            )
        if self.merged is not None:
            self.unmerge()  # a new layer's forward goes onto the base weights
        if not self._free:
            self._grow(max(4, 2 * self.capacity))
        slot = self._free.pop()
        try:
            for name, (a, b) in weights.layers.items():
                layer = self.layers.get(name) or self._install(name)
                layer.put(slot, a, b)
        except Exception:
            for name in weights.layers:
                if name in self.layers:
                    self.layers[name].clear(slot)
            self._free.append(slot)
            raise
        self._slots[key] = slot
        self._targets[key] = list(weights.layers)

    @torch.inference_mode(False)
    def remove(self, key: str) -> None:
        if key not in self._slots:
            return
        if self.merged == key:
            self.unmerge()
        slot = self._slots.pop(key)
        for name in self._targets.pop(key):
            self.layers[name].clear(slot)
        self._free.append(slot)

    def release(self) -> None:
        """The base exactly as loaded: weights unmerged, every layer its own forward."""
        self.unmerge()
        for layer in self.layers.values():
            if "forward" in vars(layer.module):
                del layer.module.forward
        self.layers.clear()
        self._step = None

    def forward_options(
        self, adapters: list[str], running: frozenset[str] = frozenset()
    ) -> dict[str, Any]:
        """Put the model in the mode for these rows (and the `running` batch's adapters,
        so that prefilling a newcomer does not merge what the next step unmerges); the
        options for the forward of these rows (none: the layers' forwards do it)."""
        self._step = None
        kinds = set(adapters) | running
        if kinds == {BASE}:
            self.unmerge()
            return {}
        if len(kinds) == 1:
            (only,) = kinds
            if self.merged == only:
                return {}
            if self._may_merge(only):
                self.unmerge()
                self._merge(only)
                return {}
        self.unmerge()
        slots = [self._slots.get(a) for a in adapters]
        if any(slot is not None for slot in slots):  # else these rows are the base's alone
            self._step = StackedStep(slots, self.capacity, self.device)
        return {}

    def unmerge(self) -> None:
        if self.merged is None:
            return
        for name in self._targets.get(self.merged, []):
            self.layers[name].module.weight.data.copy_(self._saved[name])
        self.merged = None

    def _merge(self, key: str) -> None:
        slot = self._slots[key]
        for name in self._targets[key]:
            layer = self.layers[name]
            weight = layer.module.weight
            if name not in self._saved:
                self._saved[name] = weight.detach().clone()
            weight.data.copy_((weight.float() + layer.delta(slot)).to(weight.dtype))
        self.merged = key

    def _may_merge(self, key: str) -> bool:
        if key not in self._slots:
            return False
        weights = [self.layers[name].module.weight for name in self._targets[key]]
        if not all(w.dtype.is_floating_point for w in weights):
            return False
        needed = sum(
            w.numel() * w.element_size()
            for name, w in zip(self._targets[key], weights, strict=True)
            if name not in self._saved
        )
        saved = sum(t.numel() * t.element_size() for t in self._saved.values())
        return saved + needed <= self.merge_budget_bytes

    def _install(self, name: str) -> BankLayer:
        module = self._modules[name]
        if not hasattr(module, "in_features"):
            raise AdapterInvalid(tr("The adapter targets {name}, not a linear layer", name=name))
        layer = BankLayer(module, self.capacity, self.dtype)
        module.forward = partial(self._forward, layer)
        self.layers[name] = layer
        return layer

    def _grow(self, capacity: int) -> None:
        for layer in self.layers.values():
            layer.grow(capacity)
        self._free.extend(reversed(range(self.capacity, capacity)))
        self.capacity = capacity

    def _forward(self, layer: BankLayer, x: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        output = layer.base_forward(x, *args, **kwargs)
        step = self._step
        if step is None or layer.rank == 0:
            return output
        a, b = step.columns(layer.a, layer.b)
        low = x.to(a.dtype) @ a.t()
        low = low * step.mask(low.shape[-1], low.dtype)
        return output + (low @ b).to(output.dtype)


class StackedStep:
    """One stacked forward's rows: which adapters' columns it takes, and each row's mask
    over them (ones on its own adapter's, zeros elsewhere and on a row without one)."""

    def __init__(self, slots: list[int | None], capacity: int, device: str) -> None:
        used = sorted({slot for slot in slots if slot is not None})
        # every slot in the step: the stacks as they are, no copy
        self.taken = None if len(used) == capacity else torch.tensor(used, device=device)
        block = {slot: i for i, slot in enumerate(used)}
        owner = torch.tensor([block.get(s, -1) if s is not None else -1 for s in slots])
        self.rows_by_block = torch.nn.functional.one_hot(owner + 1, len(used) + 1)[:, 1:]
        self.device = device
        self._masks: dict[tuple[int, torch.dtype], torch.Tensor] = {}

    def columns(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A as (adapters × rank, in) and B as (adapters × rank, out), this step's adapters."""
        if self.taken is not None:
            a, b = a.index_select(0, self.taken), b.index_select(0, self.taken)
        return a.flatten(0, 1), b.flatten(0, 1)

    def mask(self, width: int, dtype: torch.dtype) -> torch.Tensor:
        """(rows, 1, width): broadcast over a forward's positions."""
        key = (width, dtype)
        if key not in self._masks:
            rows, blocks = self.rows_by_block.shape
            ones = self.rows_by_block.to(dtype)[:, :, None].expand(rows, blocks, width // blocks)
            self._masks[key] = ones.reshape(rows, 1, width).to(self.device)
        return self._masks[key]
