"""After training: the questions asked for real, greedy, with the adapter and without it.

The table a user reads to trust the job (or not): each question, the expected answer, the
tuned model's answer and the base model's. It covers the validation split when the job
has one, else the first training questions. A right answer is no longer than the
reference, so decoding stops soon after it, and a row stops once it has left the reference
and shown enough of itself to read (`generation.left_reference`: a base model never ends
its answer, and its rows would otherwise cost the most).

The answers come from the serving engine, on the trained run's own weights: tuned and
base rows in one batch, prompts prefilled together, each row adding its own LoRA delta
(the engine's stacked path, the adapter loaded back from its staged files); or, when
every base answer is known already, with the adapter merged into the weights (the cost
of the bare model). This is the code that will serve the model, so the table shows what
users will get; the base model's answers are kept across jobs (base_answers.py), and the
whole table is bounded in time.
"""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

from app.core.language import Sentence
from app.ml.data import encode_pair
from app.ml.pairs import QAPair
from app.ml.serving.asking import Row, ask
from app.ml.serving.engine import Engine
from app.ml.serving.requests import AdapterRef, EngineLimits, FinishReason, Sampling
from app.ml.training.base_answers import BaseAnswers
from app.ml.training.metrics import AnswerCheck, EvaluationReport

MAX_VALIDATION_ROWS = 100
MAX_TRAINING_ROWS = 20  # without a split, a sample: the exact count is train_exact_match
KEEP_WRONG_TOKENS = 48
# Rows decoded together: a decode step reads every weight once, whatever the rows, so
# the table's tuned and base rows share it (KV cache: 64 rows of a 7B model, 256 tokens
# each, ~2 GB in bf16).
TABLE_BATCH = 64
TABLE_SECONDS = 300.0  # rows still decoding then are shown as they stand


@dataclass(frozen=True)
class TableModel:
    """What the table decodes with: the run's model, as weights with the adapter merged in
    (`weights(True)`) or taken off (`weights(False)`: the adapter then loads from its
    staged files), called once."""

    weights: Callable[[bool], Any]
    tokenizer: Any
    base_model: str  # its name, as the adapter's metadata gives it
    adapter_dir: Path
    device: str
    precision: str
    # The base's linear layers are 8- or 4-bit: merging would round the adapter into them
    # (peft requantizes), so the tuned rows always run with the adapter unmerged.
    quantized: bool = False
    # May the adapter go into the weights for good when no base row is asked? Not where
    # the run asks its model more after the table: its scope needs the base apart.
    mergeable: bool = True
    # called with `merged` once the table's engine is closed: the run's model made whole
    afterwards: Callable[[bool], None] = lambda merged: None


@dataclass(frozen=True)
class Decoded:
    text: str
    finished: bool  # False: the table's time limit (or the context) cut it short


Split = Literal["validation", "training"]


def table_questions(pairs: Sequence[QAPair], split: Split) -> list[QAPair]:
    """The pairs the table asks: the whole split (up to 100), or a sample of training."""
    return list(pairs[: MAX_VALIDATION_ROWS if split == "validation" else MAX_TRAINING_ROWS])


def answer_table(
    model: TableModel,
    pairs: Sequence[QAPair],
    *,
    split: Split,
    base_answers: BaseAnswers | None = None,
    between_steps: Callable[[], None] | None = None,
    time_limit_s: float = TABLE_SECONDS,
    kept_epoch: float | None = None,
    kept_why: Sentence | None = None,
) -> EvaluationReport:
    asked = table_questions(pairs, split)
    tokenizer = model.tokenizer
    # The tokens training taught for each answer (the template's end of turn included).
    encoded = [encode_pair(tokenizer, pair) for pair in asked]
    expected = [e.input_ids[e.prompt_len :] for e in encoded]
    prompts = [e.input_ids[: e.prompt_len] for e in encoded]
    rows_of = zip(prompts, expected, strict=True)
    keys = [BaseAnswers.row_key(p, e, KEEP_WRONG_TOKENS) for p, e in rows_of]
    known = base_answers.read() if base_answers else {}
    missing = [i for i, key in enumerate(keys) if key not in known]
    limits = EngineLimits(
        max_batch=TABLE_BATCH,
        max_waiting=2 * len(asked),
        max_adapters=1,
        max_adapter_bytes=2**62,  # the one adapter the run trained, whatever its size
        merge_budget_bytes=0,  # no copies of base weights beyond the run's memory plan
    )
    # No base row to ask: the adapter goes into the weights for good
    merged = model.mergeable and not missing and not model.quantized
    engine = Engine(
        base_model=model.base_model,
        load=lambda: (model.weights(merged), tokenizer),
        device=model.device,
        precision=model.precision,
        limits=limits,
        between_steps=between_steps,
    )
    deadline = time.monotonic() + time_limit_s
    try:
        adapter = None if merged else AdapterRef("tuned", model.adapter_dir)
        # Tuned and base rows in one batch: a decode step reads the weights once for both.
        asked_rows: list[tuple[list[int], list[int], AdapterRef | None]]
        asked_rows = [(prompts[i], expected[i], adapter) for i in range(len(asked))]
        asked_rows += [(prompts[i], expected[i], None) for i in missing]
        decoded = _decode(engine, asked_rows, deadline)
        tuned, fresh = decoded[: len(asked)], decoded[len(asked) :]
    finally:
        engine.close()
        model.afterwards(merged)
    base = dict(zip(missing, fresh, strict=True))
    if base_answers:
        base_answers.add({keys[i]: a.text for i, a in base.items() if a.finished})
    base_texts = [base[i].text if i in base else known[keys[i]] for i in range(len(asked))]
    rows = [
        AnswerCheck(
            question=pair.question,
            expected=answer,
            tuned=mine.text.strip(),
            base=theirs.strip(),
            match=mine.text.strip() == answer.strip(),
        )
        for pair, ids, mine, theirs in zip(asked, expected, tuned, base_texts, strict=True)
        for answer in [_expected_text(tokenizer, pair, ids)]
    ]
    return EvaluationReport(
        split=split,
        questions=len(rows),
        exact_match=round(sum(r.match for r in rows) / len(rows), 4),
        base_exact_match=round(sum(r.base == r.expected.strip() for r in rows) / len(rows), 4),
        kept_epoch=kept_epoch,
        kept_reason=kept_why.text() if kept_why else "",
        kept_why=kept_why,
        unfinished=sum(not a.finished for a in [*tuned, *fresh]),
        base_reused=len(asked) - len(missing),
        rows=rows,
    )


def _decode(
    engine: Engine,
    rows: list[tuple[list[int], list[int], AdapterRef | None]],
    deadline: float,
) -> list[Decoded]:
    """Each row's greedy answer (prompt, reference, adapter), decoded together; a row
    whose prompt fills the model's context has no answer."""
    # Shortest prompts first: rows prefilled together are padded to their longest.
    order = sorted(
        (i for i in range(len(rows)) if len(rows[i][0]) < engine.context),
        key=lambda i: len(rows[i][0]),
    )
    asked = [
        Row(
            rows[i][0],
            rows[i][2],
            Sampling(max_tokens=max(KEEP_WRONG_TOKENS, len(rows[i][1]) + 1)),
            enough=partial(_left, rows[i][1]),
        )
        for i in order
    ]
    choices = ask(engine, asked, seconds=max(0.0, deadline - time.monotonic())).settle()
    decoded = [Decoded("", True)] * len(rows)  # no room for an answer: as a cut one
    for i, choice in zip(order, choices, strict=True):
        ended = choice.finished is not None and choice.finished.reason in ENDED
        decoded[i] = Decoded(choice.answer, ended)
    return decoded


ENDED = (FinishReason.STOP, FinishReason.LENGTH)


def left_reference(generated: list[int], expected: list[int], keep: int) -> bool:
    """The answer table's end for a row: it can no longer be its reference answer and
    shows `keep` tokens (a base model never ends its answer, and a wrong answer needs no
    more than a look). A row that follows its reference stops at its end of turn, or one
    token past the reference: it never needs more than max(keep, len(expected) + 1)."""
    return len(generated) >= keep and generated != expected[: len(generated)]


def _left(reference: list[int], generated: list[int]) -> bool:
    return left_reference(generated, reference, KEEP_WRONG_TOKENS)


def _expected_text(tokenizer: Any, pair: QAPair, answer_ids: list[int]) -> str:
    """The answer as decoding shows it: the pair's text, or the template's writing of the
    tool calls it teaches."""
    if not pair.answer_tool_calls:
        return pair.answer
    return str(tokenizer.decode(answer_ids, skip_special_tokens=True)).strip()
