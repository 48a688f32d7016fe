"""How the engine's model runs a step's rows: bare, one adapter merged, or per-row adapters.

A step whose rows all use one adapter runs it merged into the base weights, so it costs
what the bare model does (unmerged, every LoRA linear adds two small matmuls: on a small
model that is most of a decode step). Unmerging restores saved copies of the base
weights exactly; subtracting the delta again would drift in bf16. The copies cost the
LoRA-targeted weights' bytes once, so merging is used only where they fit
`merge_budget_bytes` (otherwise peft runs the one adapter unmerged).

Rows of several adapters run "stacked": each LoRA layer's forward is replaced by its base
layer's plus every row's own delta, from the adapters' weights side by side (A of every
adapter in the step as one matrix, B likewise, scaling folded into B): x·A_all, each row's
columns of the other adapters zeroed, ·B_all. Two plain matmuls and a multiply whatever the
mix, where gathering each row's own A and B (the gather-and-bmm of LoRAX's and vLLM's
kernels) copies both per row and layer, and a forward hook to add it puts every call on
torch's slow path: a step of 8 rows over 4 adapters of the built-in model, 7.2 ms this way
against 8.7 ms gathered (bench/serve_throughput.py). peft's own per-row `adapter_names`
loops over the adapters in Python in every layer: 25 ms.
"""

from functools import partial
from typing import Any

import torch

BASE = "__base__"  # peft's name for "no adapter" in a mixed batch


class AdapterModes:
    def __init__(self, model: Any, merge_budget_bytes: int, device: str) -> None:
        self.model = model
        self.device = device
        self.merge_budget_bytes = merge_budget_bytes
        self.merged: str | None = None
        self.active: str | None = None  # peft's active adapter, as last set
        self.disabled = False
        self._saved: dict[int, torch.Tensor] = {}  # id(layer) → its pristine base weight
        # id(layer) → A as (in, slot, rank) and B as (slot, rank, out), every adapter's
        self._stacks: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self._slots: dict[str, int] = {}  # adapter key → its slot in the stacks
        self._step: StackedStep | None = None  # while stacked: the step's rows by slot
        self._stacked = False  # the LoRA layers' forwards are the stacked one

    def forward_options(
        self, adapters: list[str], running: frozenset[str] = frozenset()
    ) -> dict[str, Any]:
        """Put the model in the mode for these rows (and the `running` batch's adapters,
        so that prefilling a newcomer does not merge what the next step unmerges); the
        options for the forward of these rows."""
        self._step = None
        kinds = set(adapters) | running
        if len(kinds) == 1:
            self._detach()
        if kinds == {BASE}:
            self.unmerge()
            self._disable(True)
            return {}
        if len(kinds) == 1:
            (only,) = kinds
            self._disable(False)
            if self.active != only:
                self.unmerge()
                self.model.set_adapter(only)
                self.active = only
            if self.merged != only and self._may_merge():
                self._merge(only)
            return {}
        self.unmerge()
        self._disable(True)  # a layer no adapter targets gives the base output
        self._attach()
        slots = [self._slots.get(a) for a in adapters]
        if any(slot is not None for slot in slots):  # else these rows are the base's alone
            self._step = StackedStep(slots, len(self._slots), self.device)
        return {}

    def restack(self, dtype: torch.dtype) -> None:
        """After an adapter was loaded or deleted: every adapter's A and B by slot."""
        keys = sorted(set(self.model.peft_config))
        self._slots = {key: slot for slot, key in enumerate(keys)}
        self._stacks.clear()
        for layer in self._layers():
            present = [k for k in keys if k in layer.lora_A]
            if not present:
                continue
            rank = max(layer.lora_A[k].weight.shape[0] for k in present)
            # peft's sizes, not the base weight's shape: a quantized weight is stored packed
            size_in, size_out = layer.in_features, layer.out_features
            place = layer.lora_A[present[0]].weight.device
            a = torch.zeros(size_in, len(keys), rank, dtype=dtype, device=place)
            b = torch.zeros(len(keys), rank, size_out, dtype=dtype, device=place)
            for key in present:  # a smaller rank's columns stay zero
                slot, r = self._slots[key], layer.lora_A[key].weight.shape[0]
                a[:, slot, :r] = layer.lora_A[key].weight.detach().t()
                b[slot, :r, :] = layer.lora_B[key].weight.detach().t() * layer.scaling[key]
            self._stacks[id(layer)] = (a, b)
        if self._stacked:  # a new adapter may target new layers
            self._detach()
            self._attach()
        if self.disabled:  # a new adapter's layers start enabled
            for layer in self._layers():
                layer.enable_adapters(False)

    def _attach(self) -> None:
        if self._stacked:
            return
        for layer in self._layers():
            if id(layer) in self._stacks:
                layer.forward = partial(self._stacked_forward, layer, layer.get_base_layer())
        self._stacked = True

    def _detach(self) -> None:
        if not self._stacked:
            return
        for layer in self._layers():
            if "forward" in vars(layer):
                del layer.forward  # peft's own again
        self._stacked = False

    def _stacked_forward(self, layer: Any, base: Any, x: torch.Tensor, *args: Any) -> Any:
        output = base(x, *args)
        if self._step is None:
            return output
        a, b = self._stacks[id(layer)]
        a, b = self._step.columns(a, b)
        low = x.to(a.dtype) @ a
        low = low * self._step.mask(low.shape[-1], low.dtype)
        return output + (low @ b).to(output.dtype)

    def forget(self, key: str) -> None:
        """Before `key` is deleted from the model."""
        if self.merged == key:
            self.unmerge()
        if self.active == key:
            self.active = None

    def release(self) -> None:
        """Before the model's last adapter goes: the base exactly as loaded, no hooks."""
        self.unmerge()
        self._detach()
        self._step = None

    def unmerge(self) -> None:
        if self.merged is None:
            return
        for layer in self._layers():
            if layer.merged_adapters:
                layer.get_base_layer().weight.data.copy_(self._saved[id(layer)])
                layer.merged_adapters.clear()
                del layer.forward  # peft's own again
        self.merged = None

    def _merge(self, key: str) -> None:
        for layer in self._layers():
            if key in layer.lora_A:
                weight = layer.get_base_layer().weight
                if id(layer) not in self._saved:
                    self._saved[id(layer)] = weight.detach().clone()
                layer.merge(adapter_names=[key])
                # Merged, peft's forward only calls the base layer, after checks that
                # cost ~10% of a small model's decode step: call the base layer directly.
                layer.forward = layer.get_base_layer().forward
        self.merged = key

    def _may_merge(self) -> bool:
        if self._saved:
            return True  # the copies exist already
        needed = sum(
            layer.get_base_layer().weight.numel() * layer.get_base_layer().weight.element_size()
            for layer in self._layers()
        )
        return needed <= self.merge_budget_bytes

    def _disable(self, disabled: bool) -> None:
        if self.disabled != disabled:
            for layer in self._layers():
                layer.enable_adapters(not disabled)
            self.disabled = disabled

    def _layers(self) -> list[Any]:
        from peft.tuners.lora import LoraLayer

        return [m for m in self.model.modules() if isinstance(m, LoraLayer)]


class StackedStep:
    """One stacked forward's rows: which adapters' columns it takes, and each row's mask
    over them (ones on its own adapter's, zeros elsewhere and on a row without one)."""

    def __init__(self, slots: list[int | None], loaded: int, device: str) -> None:
        used = sorted({slot for slot in slots if slot is not None})
        # every loaded adapter in the step: the stacks as they are, no copy
        self.taken = None if len(used) == loaded else torch.tensor(used, device=device)
        block = {slot: i for i, slot in enumerate(used)}
        owner = torch.tensor([block.get(s, -1) if s is not None else -1 for s in slots])
        self.rows_by_block = torch.nn.functional.one_hot(owner + 1, len(used) + 1)[:, 1:]
        self.device = device
        self._masks: dict[tuple[int, torch.dtype], torch.Tensor] = {}

    def columns(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A as (in, adapters × rank) and B as (adapters × rank, out), this step's adapters."""
        if self.taken is not None:
            a, b = a.index_select(1, self.taken), b.index_select(0, self.taken)
        return a.flatten(1), b.flatten(0, 1)

    def mask(self, width: int, dtype: torch.dtype) -> torch.Tensor:
        """(rows, 1, width): broadcast over a forward's positions."""
        key = (width, dtype)
        if key not in self._masks:
            rows, blocks = self.rows_by_block.shape
            ones = self.rows_by_block.to(dtype)[:, :, None].expand(rows, blocks, width // blocks)
            self._masks[key] = ones.reshape(rows, 1, width).to(self.device)
        return self._masks[key]
