"""What a batch's answers score: the hidden state where answer tokens are predicted, the
summed answer loss of supervised training, and the answer tokens' log-probabilities that
DPO (preference.py) and GRPO (reinforcement.py) train on."""

from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

from app.ml.data import Batch
from app.ml.fused import IGNORE, linear_cross_entropy_sum
from app.ml.planner import LOGPS_ROWS


def answer_hidden(model: Any, batch: Batch) -> tuple[torch.Tensor, Any]:
    """The last hidden state at the positions that predict answer tokens, and the LM head."""
    causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    extra: dict[str, Any] = {}
    mask = batch.attention_mask
    if batch.seq_lens is not None:
        extra = {"qatune_seq_lens": batch.seq_lens, "qatune_shared_prefix": batch.shared_prefix}
        # "No padding": without a mask transformers reads the packing off the position ids
        # and builds a row-by-row boolean mask that varlen attention never reads, 8% of a
        # step on 400-token examples (bench/quality.py's long set).
        mask = torch.ones_like(batch.input_ids, dtype=torch.bool)
    hidden = causal_lm.model(
        input_ids=batch.input_ids,
        attention_mask=mask,
        position_ids=batch.position_ids,
        use_cache=False,
        **extra,
    ).last_hidden_state
    picked = hidden.reshape(-1, hidden.shape[-1]).index_select(0, batch.target_index)
    return picked, causal_lm.lm_head


def answer_loss_sum(model: Any, batch: Batch, hits: torch.Tensor | None = None) -> torch.Tensor:
    """Summed cross-entropy over the answer tokens of a batch.

    The LM head runs only at the positions that are trained on: with a 151,936-token
    vocabulary (Qwen2.5) full logits would cost more than the rest of the model. Head and
    loss are one fused op (fused.py) unless the head is not a plain frozen linear layer.
    """
    picked, head = answer_hidden(model, batch)
    if type(head) is torch.nn.Linear and head.bias is None and not head.weight.requires_grad:
        return linear_cross_entropy_sum(picked, head.weight, batch.targets, hits)
    logits = head(picked).float()
    if hits is not None:
        hits[:] = logits.argmax(dim=-1) == batch.targets
    return torch.nn.functional.cross_entropy(
        logits, batch.targets, reduction="sum", ignore_index=IGNORE
    )


LOGIT_ROWS = LOGPS_ROWS  # answer tokens whose logits exist at once (recomputed for the backward)


def answer_token_logps(model: Any, batch: Batch, hits: torch.Tensor | None = None) -> torch.Tensor:
    """Each answer token's log-probability, in the batch's order; `hits`, if given, whether
    each was the most likely one. A vocabulary's logits exist for LOGIT_ROWS tokens at a
    time, recomputed for the backward."""
    picked, head = answer_hidden(model, batch)
    count = batch.answer_tokens
    picked, targets = picked[:count], batch.targets[:count]
    pieces = []
    for start in range(0, count, LOGIT_ROWS):
        rows = slice(start, start + LOGIT_ROWS)
        logps, best = checkpoint(
            _token_logps, head, picked[rows], targets[rows], use_reentrant=False
        )
        pieces.append(logps)
        if hits is not None:
            hits[start : start + len(best)] = best == targets[rows]
    return torch.cat(pieces)


def answer_logps(model: Any, batch: Batch, hits: torch.Tensor | None = None) -> torch.Tensor:
    """Each example's answer log-probability (summed over its tokens)."""
    per_token = answer_token_logps(model, batch, hits)
    return per_example(batch, per_token)


def per_example(batch: Batch, per_token: torch.Tensor) -> torch.Tensor:
    """Per-token values summed over each example's answer."""
    device = per_token.device
    lengths = torch.tensor([e.answer_tokens for e in batch.examples], device=device)
    owner = torch.repeat_interleave(torch.arange(len(lengths), device=device), lengths)
    return torch.zeros(len(lengths), device=device).index_add(0, owner, per_token)


def _token_logps(
    head: Any, hidden: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    logits = head(hidden).float()
    logps = torch.log_softmax(logits, dim=-1).gather(1, targets.unsqueeze(1)).squeeze(1)
    return logps, logits.argmax(dim=-1)
