"""Prefill: the prompts of requests that join together, in one forward.

One pass over the weights for all of them (a decode step's cost, not one per request),
left-padded so that every row's last position is its prompt's last token; the cache this
makes joins the running batch as it is (batch.py).
"""

import time
from typing import Any

import torch
from transformers import DynamicCache

from app.ml.serving.adapter_cache import AdapterCache
from app.ml.serving.batch import KV_CACHE, Row
from app.ml.serving.decoding import generator_for, pick_token
from app.ml.serving.requests import GenerationRequest

PREFILL_TOKENS = 4096  # padded prompt tokens prefilled in one forward, at most

Joining = tuple[GenerationRequest, str]  # a request, and the adapter key its rows run with


def prefill_groups(joining: list[Joining]) -> list[list[Joining]]:
    """Requests in arrival order, cut so that no group's padded prompts pass PREFILL_TOKENS
    (a prefill's activations grow with them)."""
    groups: list[list[Joining]] = []
    width = 0
    for one in joining:
        longest = max(width, len(one[0].prompt_ids))
        if groups and longest * (len(groups[-1]) + 1) <= PREFILL_TOKENS:
            groups[-1].append(one)
            width = longest
        else:
            groups.append([one])
            width = len(one[0].prompt_ids)
    return groups


def prefill(
    model: Any, adapters: AdapterCache, group: list[Joining], running: frozenset[str], device: str
) -> tuple[list[Row], DynamicCache, torch.Tensor]:
    """The group's rows with their first token picked, their cache and its mask of real
    tokens. `running`: the batch's adapters, so that the mode suits the next step too."""
    inputs = left_padded([request.prompt_ids for request, _ in group], device)
    extra = adapters.forward_options([adapter for _, adapter in group], running=running)
    cache = {KV_CACHE: DynamicCache(config=model.config)}
    out = model(**inputs, **cache, use_cache=True, logits_to_keep=1, **extra)
    rows = []
    for i, (request, adapter) in enumerate(group):
        generator = generator_for(request.sampling, device)
        row = Row(request, adapter, 0, len(request.prompt_ids), generator)
        row.next_token = pick_token(out.logits[i, -1], request.sampling, generator)
        request.first_token_at = time.monotonic()
        rows.append(row)
    return rows, getattr(out, KV_CACHE), inputs["attention_mask"]


def left_padded(prompts: list[list[int]], device: str) -> dict[str, torch.Tensor]:
    """Prompts as one left-padded batch: ids, the mask of real tokens, each row's positions."""
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts], device=device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    return {"input_ids": ids, "attention_mask": mask, "position_ids": positions}
