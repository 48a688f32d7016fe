"""How the engine's model runs a step's rows: bare, one adapter merged, or per-row adapters.

A step whose rows all use one adapter runs it merged into the base weights, so it costs
what the bare model does (unmerged, every LoRA linear adds two small matmuls: on a small
model that is most of a decode step). Unmerging restores saved copies of the base
weights exactly; subtracting the delta again would drift in bf16. The copies cost the
LoRA-targeted weights' bytes once, so merging is used only where they fit
`merge_budget_bytes` (otherwise peft runs the one adapter unmerged).

Rows of several adapters run "stacked": peft's adapters are switched off, and a forward
hook on each LoRA layer adds every row's own delta with two batched matmuls over the
adapters' weights stacked by slot (x·A[slot]·B[slot], scaling folded into B) — the
gather-and-bmm that LoRAX and vLLM do in custom kernels. peft's own per-row
`adapter_names` loops over the adapters in Python in every layer: 1.8x slower here.
"""

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
        self._stacks: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id(layer) → A, B
        self._slots: dict[str, int] = {}  # adapter key → its slot in the stacks (0: none)
        self._rows: torch.Tensor | None = None  # per-row slots while stacked, else None
        self._hooks: list[Any] = []  # on every LoRA layer while stacked (a hook slows a call)

    def forward_options(
        self, adapters: list[str], running: frozenset[str] = frozenset()
    ) -> dict[str, Any]:
        """Put the model in the mode for these rows (and the `running` batch's adapters,
        so that prefilling a newcomer does not merge what the next step unmerges); the
        options for the forward of these rows."""
        self._rows = None
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
        self._disable(True)  # peft's layers give the base output; the hooks add the rest
        self._attach()
        self._rows = torch.tensor([self._slots.get(a, 0) for a in adapters], device=self.device)
        return {}

    def restack(self, dtype: torch.dtype) -> None:
        """After an adapter was loaded or deleted: every adapter's A and B by slot."""
        keys = sorted(set(self.model.peft_config))
        self._slots = {key: slot for slot, key in enumerate(keys, start=1)}
        self._stacks.clear()
        for layer in self._layers():
            present = [k for k in keys if k in layer.lora_A]
            if not present:
                continue
            rank = max(layer.lora_A[k].weight.shape[0] for k in present)
            # peft's sizes, not the base weight's shape: a quantized weight is stored packed
            size_in, size_out = layer.in_features, layer.out_features
            place = layer.lora_A[present[0]].weight.device
            a = torch.zeros(len(keys) + 1, size_in, rank, dtype=dtype, device=place)
            b = torch.zeros(len(keys) + 1, rank, size_out, dtype=dtype, device=place)
            for key in present:
                slot, r = self._slots[key], layer.lora_A[key].weight.shape[0]
                a[slot, :, :r] = layer.lora_A[key].weight.detach().t()
                b[slot, :r, :] = layer.lora_B[key].weight.detach().t() * layer.scaling[key]
            self._stacks[id(layer)] = (a, b)
        if self._hooks:  # a new adapter may target new layers
            self._detach()
            self._attach()
        if self.disabled:  # a new adapter's layers start enabled
            for layer in self._layers():
                layer.enable_adapters(False)

    def _attach(self) -> None:
        if not self._hooks:
            self._hooks = [layer.register_forward_hook(self._add_rows) for layer in self._layers()]

    def _detach(self) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks = []

    def _add_rows(self, layer: Any, args: tuple[Any, ...], output: torch.Tensor) -> Any:
        if self._rows is None or id(layer) not in self._stacks:
            return None
        a, b = self._stacks[id(layer)]
        x = args[0]
        low = torch.bmm(x.to(a.dtype), a.index_select(0, self._rows))
        return output + torch.bmm(low, b.index_select(0, self._rows)).to(output.dtype)

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
        self._rows = None

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
