"""The running batch: rows decoding together over one left-padded KV cache.

Each row is one request at its own length. The cache holds every row's keys and values
right-aligned, so one decode step appends one column for all rows; the attention mask
hides each row's left padding and `position_ids` give each row its own positions.
Requests join by having their prompts prefilled together (left-padded) and that cache
padded in; a request leaves by having its row sliced out (and columns that only padding
filled trimmed).
"""

from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer
from transformers.modeling_outputs import CausalLMOutputWithPast

from app.ml.serving.requests import GenerationRequest

# The key/value cache's argument and output, by the name this transformers gives them: it
# renamed `past_key_values` to `cache` within 5.x (5.20 knows only the old name; the old
# name is gone in 5.40).
KV_CACHE = "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"


@dataclass
class Row:
    request: GenerationRequest
    adapter: str  # an adapter key, or BASE
    next_token: int  # sampled, not yet fed to the model
    position: int  # the next token's position (tokens of this row so far)
    generator: torch.Generator | None = None


@dataclass
class RunningBatch:
    rows: list[Row] = field(default_factory=list)
    cache: DynamicCache | None = None
    mask: torch.Tensor | None = None  # [rows, columns]; 1 for real tokens, 0 for padding

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def adapters(self) -> set[str]:
        return {row.adapter for row in self.rows}

    def join(self, rows: list[Row], cache: DynamicCache, mask: torch.Tensor) -> None:
        """Add prefilled requests: their cache has one row each, left-padded as `mask` says."""
        layers = _layers(cache)
        if self.cache is None or self.mask is None:
            self.rows = list(rows)
            self.cache = _cache(layers)
            self.mask = mask
            return
        mine = _layers(self.cache)
        width = max(mask.shape[1], self.mask.shape[1])
        merged = [
            (
                torch.cat([_pad_left(k, width), _pad_left(nk, width)]),
                torch.cat([_pad_left(v, width), _pad_left(nv, width)]),
            )
            for (k, v), (nk, nv) in zip(mine, layers, strict=True)
        ]
        self.mask = torch.cat([_pad_left(self.mask, width), _pad_left(mask.to(self.mask), width)])
        self.cache = _cache(merged)
        self.rows += rows

    def keep(self, kept: list[int]) -> None:
        """Keep only these rows (by index); trim the columns no kept row uses."""
        if len(kept) == len(self.rows):
            return
        if not kept or self.cache is None or self.mask is None:
            self.rows, self.cache, self.mask = [], None, None
            return
        index = torch.tensor(kept, device=self.mask.device)
        mask = self.mask.index_select(0, index)
        first_used = int(mask.any(dim=0).long().argmax())
        layers = [
            (
                k.index_select(0, index)[..., first_used:, :],
                v.index_select(0, index)[..., first_used:, :],
            )
            for k, v in _layers(self.cache)
        ]
        self.cache = _cache(layers)
        self.mask = mask[:, first_used:]
        self.rows = [self.rows[i] for i in kept]

    def step_inputs(self) -> dict[str, Any]:
        """One new token per row, at its own position, seeing its own tokens only."""
        assert self.mask is not None
        device = self.mask.device
        self.mask = torch.cat(
            [self.mask, torch.ones(len(self.rows), 1, dtype=self.mask.dtype, device=device)], dim=1
        )
        return {
            "input_ids": torch.tensor([[r.next_token] for r in self.rows], device=device),
            "position_ids": torch.tensor([[r.position] for r in self.rows], device=device),
            "attention_mask": self.mask,
            KV_CACHE: self.cache,
            "use_cache": True,
        }


def _layers(cache: DynamicCache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(layer.keys, layer.values) for layer in cache.layers]  # type: ignore[union-attr,misc]


def _cache(layers: list[tuple[torch.Tensor, torch.Tensor]]) -> DynamicCache:
    """A cache over these tensors as they are. transformers' own constructor copies each one
    (onto an empty tensor): a second copy of the whole batch's cache at every join and leave
    (200 MB for 32 rows of 512 tokens of the Qwen2.5-0.5B shape in bf16, 940 MB on 7B)."""
    cache = DynamicCache()
    for keys, values in layers:
        layer = DynamicLayer()
        layer.lazy_initialization(keys, values)
        layer.keys, layer.values = keys, values
        cache.layers.append(layer)
    return cache


def _pad_left(tensor: torch.Tensor, width: int) -> torch.Tensor:
    """Zeros before the sequence axis (-2 for keys/values, -1 for a mask) up to `width`."""
    axis = -1 if tensor.dim() == 2 else -2
    missing = width - tensor.shape[axis]
    if missing == 0:
        return tensor
    shape = list(tensor.shape)
    shape[axis] = missing
    return torch.cat([tensor.new_zeros(shape), tensor], dim=axis)
