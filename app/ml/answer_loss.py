"""What a batch's answers score: the hidden state where answer tokens are predicted, and the
summed answer loss of supervised training (preference.py has DPO's log-probabilities)."""

from typing import Any

import torch

from app.ml.data import Batch
from app.ml.fused import IGNORE, linear_cross_entropy_sum


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
