"""Packed training without padding: one flat row of real tokens, attention per example.

transformers 5 models look their attention function up in a registry and pass the
model's extra keyword arguments down to it. We register `qatune_varlen`: given
`qatune_seq_lens` it runs causal SDPA on each example's slice of the row (so examples
never see each other), and without it behaves exactly like "sdpa" (generation,
evaluation). With `qatune_shared_prefix` the row starts with tokens every example shares
(data.py): the prefix attends to itself, and each example to the prefix and to itself.
Every per-token op (the linear layers, norms, MLP) then runs on real tokens only, and
attention costs each example's own length, not a padded row's.

`enable_varlen` checks on the loaded model that examples really are isolated and see the
shared prefix, because an architecture that does not route attention through the registry
would otherwise mix them silently; the trainer falls back to 4D-mask packing for such
models.
"""

from contextlib import nullcontext
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import sdpa_mask

from app.ml.activations import CPU_MATH_BELOW_TOKENS

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
    qatune_shared_prefix: int = 0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    if qatune_seq_lens is None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    # query: [1, heads, tokens, dim]; key/value: [1, kv_heads, tokens, dim]
    gqa = query.shape[1] != key.shape[1]
    math_below = CPU_MATH_BELOW_TOKENS if query.device.type == "cpu" else 0
    prefix = qatune_shared_prefix
    lengths = [prefix, *qatune_seq_lens] if prefix else qatune_seq_lens
    # split, not slicing: its backward is one cat, where each slice's backward would
    # materialise a zero gradient the size of the whole row.
    queries, keys, values = (t.split(lengths, dim=2) for t in (query, key, value))
    outputs = []
    for i, (q, k, v) in enumerate(zip(queries, keys, values, strict=True)):
        repeated = 0  # leading query rows computed again, to be dropped
        if prefix and i > 0:
            k, v = torch.cat([keys[0], k], dim=2), torch.cat([values[0], v], dim=2)
            if prefix <= q.shape[2]:
                # The prefix's queries in front make it plain causal attention, which
                # skips the masked half: 1.25x faster than a mask on 650-token examples.
                q, repeated = torch.cat([queries[0], q], dim=2), prefix
        out = _causal_attention(q, k, v, dropout, scaling, gqa, math_below)
        outputs.append(out[:, :, repeated:] if repeated else out)
    return torch.cat(outputs, dim=2).transpose(1, 2).contiguous(), None


def _causal_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    dropout: float,
    scaling: float | None,
    gqa: bool,
    math_below: int,
) -> torch.Tensor:
    """Causal attention of the last q.shape[2] positions of k: with a shared prefix in
    front, query j sees keys up to prefix + j (SDPA's is_causal aligns top-left instead)."""
    if q.device.type == "cpu" and q.dtype == torch.bfloat16:
        # The CPU makes and keeps bf16 attention kernels for every new length (2-5 MB
        # each: a long job's example lengths grew the heap by a GB); fp32's are not kept,
        # and attention is a small share of a short example's step.
        with torch.autocast("cpu", enabled=False):
            out = _causal_attention(
                q.float(), k.float(), v.float(), dropout, scaling, gqa, math_below
            )
        return out.to(q.dtype)
    queries, keys = q.shape[2], k.shape[2]
    mask = None
    if keys > queries:
        mask = torch.ones(queries, keys, dtype=torch.bool, device=q.device).tril(keys - queries)
    with sdpa_kernel(SDPBackend.MATH) if keys < math_below else nullcontext():
        return F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=mask,
            dropout_p=dropout,
            is_causal=mask is None,
            scale=scaling,
            enable_gqa=gqa,
        )


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
    """Does an example packed after another, behind a shared prefix, come out as alone?

    Both runs go through the varlen path, so they use the same attention kernel; a model
    that leaks between examples, or loses the prefix, differs by far more than bf16
    rounding.
    """
    device = next(causal_lm.parameters()).device
    alone = causal_lm.model(
        input_ids=torch.tensor([[5, 6, 8, 9]], device=device),
        qatune_seq_lens=[4],
        use_cache=False,
    ).last_hidden_state[:, 2:]
    packed = causal_lm.model(  # prefix [5, 6], then examples [7] and [8, 9]
        input_ids=torch.tensor([[5, 6, 7, 8, 9]], device=device),
        position_ids=torch.tensor([[0, 1, 2, 2, 3]], device=device),
        qatune_seq_lens=[1, 2],
        qatune_shared_prefix=2,
        use_cache=False,
    ).last_hidden_state[:, 3:]
    return bool((packed.float() - alone.float()).norm() <= 0.02 * alone.float().norm())
