"""How many requests decode together: at most `max_batch` rows, and at most the bytes of
key/value cache that `kv_cache_bytes` allows.

The running batch's cache is one left-padded tensor per layer, every row as long as the
longest (batch.py), so a batch of n rows whose longest may grow to L tokens holds
n × L × (bytes per token). A request reserves what it may grow to, its prompt and its
`max_tokens` within the context; it joins while the batch still fits. Many short chats
share a step (on the built-in model 32 rows take a step 1.3-1.8x as long as 8, not 4x), where
a few long conversations on a 7B model already fill the budget. A lone request always
runs: the context bounds it.
"""

from dataclasses import dataclass
from typing import Any

import torch

from app.ml.serving.requests import EngineLimits, GenerationRequest
from app.ml.shapes import ModelShape


@dataclass(frozen=True)
class KvBudget:
    max_rows: int
    budget_bytes: int
    bytes_per_token: int  # keys and values of every layer
    context: int

    @classmethod
    def for_model(cls, config: Any, dtype: torch.dtype, limits: EngineLimits) -> "KvBudget":
        shape = ModelShape.from_config(config.to_dict())
        per_token = 2 * shape.num_layers * shape.num_kv_heads * shape.head_dim * dtype.itemsize
        return cls(limits.max_batch, limits.kv_cache_bytes, per_token, shape.max_positions)

    def tokens(self, request: GenerationRequest) -> int:
        """The most this request's row may hold."""
        return min(self.context, len(request.prompt_ids) + request.sampling.max_tokens)

    def room_for(self, reserved: list[int], request: GenerationRequest) -> bool:
        """Whether `request` may join rows that reserved these tokens each."""
        if not reserved:
            return True
        if len(reserved) >= self.max_rows:
            return False
        longest = max(*reserved, self.tokens(request))
        return (len(reserved) + 1) * longest * self.bytes_per_token <= self.budget_bytes
