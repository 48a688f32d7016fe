"""Packed training without padding: one flat row of real tokens, attention per example.

transformers 5 models look their attention function up in a registry and pass the
model's extra keyword arguments down to it. We register `qatune_varlen`: given
`qatune_seq_lens` it runs causal SDPA on each example's slice of the row (so examples
never see each other), and without it behaves exactly like "sdpa" (generation,
evaluation). Every per-token op (the linear layers, norms, MLP) then runs on real tokens
only, and attention costs each example's own length, not a padded row's.

`supports_varlen` checks on the loaded model that examples really are isolated, because
an architecture that does not route attention through the registry would otherwise mix
them silently; the trainer falls back to 4D-mask packing for such models.
"""

import functools
from typing import Any

import torch
import torch.nn.functional as F
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import sdpa_mask

VARLEN = "qatune_varlen"


def varlen_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    qatune_seq_lens: list[int] | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    if qatune_seq_lens is None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    # query: [1, heads, tokens, dim]; key/value: [1, kv_heads, tokens, dim]
    gqa = query.shape[1] != key.shape[1]
    if PADDED_MODE == "always" or (PADDED_MODE == "auto" and _padding_is_cheap(qatune_seq_lens)):
        return _padded_attention(query, key, value, qatune_seq_lens, dropout, scaling, gqa)
    # split, not slicing: its backward is one cat, where each slice's backward would
    # materialise a zero gradient the size of the whole row.
    outputs = [
        F.scaled_dot_product_attention(
            q, k, v, dropout_p=dropout, is_causal=True, scale=scaling, enable_gqa=gqa
        )
        for q, k, v in zip(
            query.split(qatune_seq_lens, dim=2),
            key.split(qatune_seq_lens, dim=2),
            value.split(qatune_seq_lens, dim=2),
            strict=True,
        )
    ]
    return torch.cat(outputs, dim=2).transpose(1, 2).contiguous(), None


PADDED_MODE = "auto"
PADDING_FACTOR = 4.0


def _padding_is_cheap(seq_lens: list[int]) -> bool:
    longest = max(seq_lens)
    return len(seq_lens) * longest * longest <= PADDING_FACTOR * sum(n * n for n in seq_lens)


@functools.lru_cache(maxsize=16)
def _padded_layout(seq_lens: tuple[int, ...], device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Where each padded slot reads from (padding reads token 0), and where each token went."""
    longest = max(seq_lens)
    gather = torch.zeros(len(seq_lens), longest, dtype=torch.long)
    keep: list[int] = []
    start = 0
    for i, length in enumerate(seq_lens):
        gather[i, :length] = torch.arange(start, start + length)
        keep.extend(range(i * longest, i * longest + length))
        start += length
    return gather.view(-1).to(device), torch.tensor(keep, device=device)


def _padded_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    seq_lens: list[int],
    dropout: float,
    scaling: float | None,
    gqa: bool,
) -> tuple[torch.Tensor, None]:
    """All examples in one causal SDPA call, right-padded to the longest.

    Causal attention never looks right, so a real token never sees its example's padding:
    no mask is needed, padded queries are dropped, and their gradients are exactly zero.
    """
    gather, keep = _padded_layout(tuple(seq_lens), str(query.device))
    n, longest = len(seq_lens), max(seq_lens)

    def pad(x: torch.Tensor) -> torch.Tensor:  # [1, h, tokens, d] → [n, h, longest, d]
        heads, dim = x.shape[1], x.shape[3]
        return x[0].index_select(1, gather).view(heads, n, longest, dim).transpose(0, 1)

    out = F.scaled_dot_product_attention(
        pad(query),
        pad(key),
        pad(value),
        dropout_p=dropout,
        is_causal=True,
        scale=scaling,
        enable_gqa=gqa,
    )
    heads, dim = out.shape[1], out.shape[3]
    tokens = out.transpose(1, 2).reshape(n * longest, heads, dim).index_select(0, keep)
    return tokens.unsqueeze(0), None


AttentionInterface.register(VARLEN, varlen_attention)
AttentionMaskInterface.register(VARLEN, sdpa_mask)


def enable_varlen(model: Any) -> bool:
    """Switch the model to varlen attention if it isolates examples; False if it does not."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    previous = base.config._attn_implementation
    base.config._attn_implementation = VARLEN
    if _isolates_examples(base):
        return True
    base.config._attn_implementation = previous
    return False


@torch.no_grad()
def _isolates_examples(causal_lm: Any) -> bool:
    device = next(causal_lm.parameters()).device
    first = torch.tensor([[5, 6, 7]], device=device)
    second = torch.tensor([[8, 9]], device=device)
    alone = causal_lm.model(input_ids=second, use_cache=False).last_hidden_state
    packed = causal_lm.model(
        input_ids=torch.cat([first, second], dim=1),
        position_ids=torch.tensor([[0, 1, 2, 0, 1]], device=device),
        qatune_seq_lens=[3, 2],
        use_cache=False,
    ).last_hidden_state
    return torch.allclose(packed[:, 3:].float(), alone.float(), atol=1e-2, rtol=1e-2)
