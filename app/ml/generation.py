"""Greedy answers from a loaded model with transformers' `generate`, in the training
precision: the benchmarks' checks and the tests' reference answers use it (the service and
the job's answer table answer through the serving engine, serving/). It knows nothing of
adapters' storage or HTTP.
"""

from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from app.ml.data import prompt_ids
from app.ml.serving.text import answer_text

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def autocast_for(device: str, precision: str) -> AbstractContextManager[Any]:
    """The same mixed precision as training: autocast to bf16/fp16, nothing for fp32."""
    if precision == "fp32":
        return nullcontext()
    return torch.autocast(device_type=device, dtype=DTYPES[precision])


def left_reference(generated: list[int], expected: list[int], keep: int) -> bool:
    """The answer table's end for a row: it can no longer be its reference answer and
    shows `keep` tokens (a base model never ends its answer, and a wrong answer needs no
    more than a look). A row that follows its reference stops at its end of turn, or one
    token past the reference: it never needs more than max(keep, len(expected) + 1)."""
    return len(generated) >= keep and generated != expected[: len(generated)]


class Diverged:
    """`left_reference` for the rows of transformers' `generate`."""

    def __init__(self, width: int, expected: list[list[int]], keep: int) -> None:
        self.width, self.expected, self.keep = width, expected, keep

    def __call__(self, input_ids: torch.Tensor, scores: Any, **kwargs: Any) -> torch.Tensor:
        generated = input_ids[:, self.width :].tolist()
        done = [
            left_reference(row, expected, self.keep)
            for row, expected in zip(generated, self.expected, strict=True)
        ]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


def generate_answers(
    model: Any,
    tokenizer: Any,
    conversations: list[list[dict[str, str]]],
    *,
    device: str,
    precision: str = "fp32",
    max_new_tokens: int = 256,
    batch_size: int = 16,
    expected: list[list[int]] | None = None,
    keep_wrong_tokens: int = 48,
) -> list[str]:
    """Greedy answers to many prompts, `batch_size` at a time (left-padded: each answer is
    what the prompt alone would get), with transformers' own `generate`. With the `expected`
    answers' token ids, a row stops once it cannot be its expected answer any more, with
    `keep_wrong_tokens` of it kept to show."""
    from transformers import StoppingCriteriaList

    pad = int(tokenizer.pad_token_id)
    answers: list[str] = []
    for start in range(0, len(conversations), batch_size):
        prompts = [prompt_ids(tokenizer, c) for c in conversations[start : start + batch_size]]
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        stop = None
        if expected is not None:
            rows = expected[start : start + batch_size]
            stop = StoppingCriteriaList([Diverged(width, rows, keep_wrong_tokens)])
        with torch.no_grad(), autocast_for(device, precision):
            output = model.generate(
                input_ids=ids,
                attention_mask=mask.to(device),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=pad,
                stopping_criteria=stop,
            )
        for row in output[:, width:].tolist():  # as the engine shows answers
            answers.append(answer_text(tokenizer, row))
    return answers
