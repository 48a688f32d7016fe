"""Held-out evaluation: the loss on answer tokens, and how many answers greedy decoding gets
exactly right."""

from collections.abc import Sequence
from typing import Any

import torch

from app.ml.data import answer_loss_sum, encode_pairs, micro_batches
from app.ml.events import Evaluated
from app.ml.generation import generate_answer
from app.ml.pairs import QAPair

EVAL_MICRO_BATCH_TOKENS = 8192


def evaluate(
    model: Any,
    tokenizer: Any,
    pairs: Sequence[QAPair],
    *,
    max_seq_length: int,
    device: str,
    precision: str,
) -> Evaluated:
    model.eval()
    examples, _ = encode_pairs(tokenizer, pairs, max_seq_length)
    loss_sum, count = 0.0, 0
    with torch.no_grad():
        for batch in micro_batches(
            examples,
            row_tokens=max_seq_length,
            micro_batch_tokens=EVAL_MICRO_BATCH_TOKENS,
            pad_id=int(tokenizer.pad_token_id),
        ):
            loss_sum += answer_loss_sum(model, batch.to(device)).item()
            count += batch.answer_tokens
    # A right answer is no longer than the reference: stop generating soon after it.
    longest = max(len(tokenizer(p.answer, add_special_tokens=False).input_ids) for p in pairs)
    exact = sum(
        generate_answer(
            model,
            tokenizer,
            pair.prompt_messages(),
            device=device,
            precision=precision,
            max_new_tokens=longest + 8,
        ).strip()
        == pair.answer.strip()
        for pair in pairs
    )
    model.train()
    return Evaluated(
        eval_loss=round(loss_sum / max(1, count), 5),
        eval_exact_match=round(exact / len(pairs), 4),
        eval_examples=len(pairs),
    )
