"""After training: the questions asked for real, greedy, with the adapter and without it.

The table a user reads to trust the job (or not): each question, the expected answer, the
tuned model's answer and the base model's. It covers the validation split when the job
has one, else the first training questions. Answers are decoded in batches; a right
answer is no longer than the reference, so decoding stops soon after it, and a row stops
once it has left the reference and shown enough of itself to read (a base model never
ends its answer: its rows would otherwise cost the most).
"""

from collections.abc import Sequence
from functools import partial
from typing import Any, Literal

from app.ml.data import encode_pair
from app.ml.generation import generate_answers
from app.ml.pairs import QAPair
from app.ml.training.metrics import AnswerCheck, EvaluationReport

MAX_VALIDATION_ROWS = 100
MAX_TRAINING_ROWS = 20  # without a split, a sample: the exact count is train_exact_match


def answer_table(
    model: Any,
    tokenizer: Any,
    pairs: Sequence[QAPair],
    *,
    split: Literal["validation", "training"],
    device: str,
    precision: str,
    kept_epoch: float | None = None,
    kept_reason: str = "",
) -> EvaluationReport:
    asked = list(pairs[: MAX_VALIDATION_ROWS if split == "validation" else MAX_TRAINING_ROWS])
    # The tokens training taught for each answer (the template's end of turn included).
    expected = [e.input_ids[e.prompt_len :] for e in map(partial(encode_pair, tokenizer), asked)]
    conversations = [pair.prompt_messages() for pair in asked]

    def answers() -> list[str]:
        return generate_answers(
            model,
            tokenizer,
            conversations,
            device=device,
            precision=precision,
            max_new_tokens=max(len(ids) for ids in expected) + 8,
            expected=expected,
        )

    model.eval()
    tuned = answers()
    with model.disable_adapter():  # peft: the base model's own answers
        base = answers()
    model.train()
    rows = [
        AnswerCheck(
            question=pair.question,
            expected=pair.answer,
            tuned=mine.strip(),
            base=theirs.strip(),
            match=mine.strip() == pair.answer.strip(),
        )
        for pair, mine, theirs in zip(asked, tuned, base, strict=True)
    ]
    return EvaluationReport(
        split=split,
        questions=len(rows),
        exact_match=round(sum(r.match for r in rows) / len(rows), 4),
        base_exact_match=round(sum(r.base == r.expected.strip() for r in rows) / len(rows), 4),
        kept_epoch=kept_epoch,
        kept_reason=kept_reason,
        rows=rows,
    )
