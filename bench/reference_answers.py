"""Greedy answers with transformers' own `generate`, in the training precision: the
reference the benchmarks check the serving engine against, and the tests' reference
answers (qatune itself answers through its engine: app/ml/serving/asking.py)."""

from typing import Any

import torch

from app.ml.data import prompt_ids
from app.ml.precision import autocast_for
from app.ml.serving.text import answer_text
from app.ml.training.evaluation import left_reference


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


def exact_count(model: Any, tokenizer: Any, pairs: list[dict[str, str]], precision: str) -> int:
    """How many of `pairs` the model answers exactly (outer spaces aside), greedy on the
    CPU, with room for each answer and a little more: how the benchmarks count trained
    answers."""
    from app.ml.pairs import QAPair

    qa = [QAPair(pair["question"], pair["answer"]) for pair in pairs]
    longest = max(len(tokenizer(p.answer, add_special_tokens=False).input_ids) for p in qa)
    answers = generate_answers(
        model,
        tokenizer,
        [p.prompt_messages() for p in qa],
        device="cpu",
        precision=precision,
        max_new_tokens=longest + 8,
    )
    return sum(a.strip() == p.answer.strip() for a, p in zip(answers, qa, strict=True))
