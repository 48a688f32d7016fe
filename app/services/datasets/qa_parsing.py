"""QA pairs from an uploaded file's records (file_records.py reads them from JSONL, JSON,
CSV or an Excel workbook), every problem reported with its place.

Accepted records: {"question", "answer", "rewordings"?, "system"?} (its fields without
case, as a table's header is); alpaca {"instruction", "input"?, "output", "system"?}; chat
(OpenAI's fine-tuning format, conversations.py beside this one) {"messages": [...]}, where
each assistant message is an answer to learn; OpenAI's preference records; TRL's and
ShareGPT's records (hub_records.py).
"""

import difflib
import json
from dataclasses import dataclass
from typing import Any

from app.core.json_text import (
    NOT_UNICODE,
    dotted,
    lone_surrogate_at,
    might_hold_a_surrogate,
)
from app.core.language import Sentence, deferred, tr
from app.jobs.limits import MAX_PAIRS, MAX_REWORDINGS
from app.ml.pairs import QAPair
from app.services.datasets.conversations import conversation_pairs, preference_pair
from app.services.datasets.file_records import PAIR_FIELDS, RECORD_FIELDS, read_records
from app.services.datasets.hub_records import hub_pairs, is_hub_record
from app.services.datasets.qa_problems import Problems, Where, json_kind, text_field

ACCEPTED = deferred(
    'each record needs "question" and "answer" (or "prompt" and "completion", or alpaca '
    '"instruction"/"output", or OpenAI chat "messages": an optional system message, then user '
    'and assistant messages, or ShareGPT "conversations", or a preference record: OpenAI\'s '
    '"input", "preferred_output", "non_preferred_output" or "prompt", "chosen", "rejected")'
)


@dataclass(frozen=True)
class ParsedQA:
    format: str
    pairs: list[QAPair]
    notes: list[Sentence]  # what reading it passed over (Problems.notes)


def parse_qa_bytes(
    content: bytes, *, filename: str | None = None, max_rows: int = MAX_PAIRS
) -> ParsedQA:
    """Parse and validate a whole file; ValidationFailed lists every problem found."""
    problems = Problems()
    fmt, records = read_records(content, filename, problems)
    pairs: list[QAPair] = []
    surrogates_possible = might_hold_a_surrogate(content)  # walk the records only then
    for where, record in records:
        if surrogates_possible and (at := lone_surrogate_at(record)) is not None:
            problems.add(tr(NOT_UNICODE), field=dotted(at) or None, at=where)
            continue
        pairs.extend(normalize_record(record, where, problems))
    if len(pairs) + problems.total > max_rows:
        problems.add(
            tr(
                "too many rows: {rows}, the limit is {max_rows}; split the file or raise "
                "QATUNE_MAX_DATASET_ROWS",
                rows=len(pairs) + problems.total,
                max_rows=max_rows,
            )
        )
    if not pairs and not problems.total:
        problems.add(tr("no question-answer pairs found"), line=1)
    problems.raise_if_any(tr("The {format} file", format=fmt.upper()))
    return ParsedQA(fmt, pairs, problems.notes)


def normalize_record(record: Any, where: Where, problems: Problems) -> list[QAPair]:
    """One record of any accepted shape → the answers it trains, or a reported problem."""
    if not isinstance(record, dict):
        problems.add(
            tr(
                "expected an object, got {kind}; {accepted}",
                kind=json_kind(record),
                accepted=tr(ACCEPTED),
            ),
            at=where,
        )
        return []
    record = _pair_fields_without_case(record)
    if "messages" in record:
        return conversation_pairs(record, where, problems)
    if "input" in record and ("preferred_output" in record or "non_preferred_output" in record):
        return preference_pair(record, where, problems)
    if "question" in record or "answer" in record:
        fields = {"question": record.get("question"), "answer": record.get("answer")}
    elif "instruction" in record or "output" in record:
        instruction, extra = record.get("instruction"), record.get("input")
        if isinstance(extra, str) and extra.strip() and isinstance(instruction, str):
            instruction = f"{instruction}\n\n{extra}"
        fields = {"instruction": instruction, "output": record.get("output")}
    elif is_hub_record(record):
        return hub_pairs(record, where, problems)
    else:
        meant = _meant(record)
        hint = tr(" (did you mean {names}?)", names=", ".join(meant)) if meant else ""
        problems.add(
            tr(
                "unknown record fields {fields}{hint}; {accepted}",
                fields=sorted(record)[:5],
                hint=hint,
                accepted=tr(ACCEPTED),
            ),
            at=where,
        )
        return []
    values = [text_field(name, value, where, problems) for name, value in fields.items()]
    rewordings = _rewordings(record.get("rewordings"), where, problems)
    given = record.get("system")  # the system prompt it is asked under, as a chat's first turn
    system = None if given is None else text_field("system", given, where, problems)
    if values[0] is None or values[1] is None or (given is not None and system is None):
        return []
    questions = dict.fromkeys([values[0], *rewordings])  # one each, in order
    return [QAPair(question, values[1], system) for question in questions]


def _pair_fields_without_case(record: dict[str, Any]) -> dict[str, Any]:
    """A question/answer record's fields read without case, as a table's header is:
    {"Question", "Answer"} is what pandas writes of a sheet's columns (to_json, orient
    records). Only where neither is written as qatune spells it, and no two keys meet."""
    if "question" in record or "answer" in record:
        return record
    lowered = {key: key.strip().lower() for key in record}
    ours = {key: name for key, name in lowered.items() if name in PAIR_FIELDS}
    if not {"question", "answer"} & set(ours.values()):
        return record
    if len(set(ours.values())) < len(ours):
        return record  # "Question" and "QUESTION": which is meant is not ours to pick
    return {ours.get(key, key): value for key, value in record.items()}


def _meant(record: dict[str, Any]) -> list[str]:
    """The record fields its keys were likely meant to be: "Question" (a spreadsheet's
    header), "questoin"."""
    names = (
        difflib.get_close_matches(key.lower(), RECORD_FIELDS, n=1, cutoff=0.8) for key in record
    )
    return sorted({name[0] for name in names if name})


def _rewordings(value: Any, where: Where, problems: Problems) -> list[str]:
    """A pair's `rewordings`: the same question worded otherwise, each trained as a pair of
    its own with the same answer, so that the model learns the fact, not the string (on a
    pretrained model, a held-out rewording was answered right far more often with one
    trained beside it: docs/benchmarks.md, "Teach without breaking")."""
    if value is None:
        return []
    if not isinstance(value, list):
        problems.add(
            tr('"rewordings" must be a list of questions, not {kind}', kind=json_kind(value)),
            field="rewordings",
            at=where,
        )
        return []
    if len(value) > MAX_REWORDINGS:
        problems.add(
            tr(
                '"rewordings" holds {count} questions; the limit is {limit}',
                count=len(value),
                limit=MAX_REWORDINGS,
            ),
            field="rewordings",
            at=where,
        )
        return []
    checked = [text_field("rewordings", item, where, problems) for item in value]
    return [item for item in checked if item is not None]


def validate_pairs(records: list[dict[str, Any]]) -> list[QAPair]:
    """Inline `qa_pairs` of POST /jobs: the same rules as a file, numbered by item."""
    problems = Problems()
    pairs = []
    for index, record in enumerate(records, start=1):
        pairs.extend(normalize_record(record, {"item": index}, problems))
    problems.raise_if_any("qa_pairs")
    return pairs


def write_jsonl(pairs: list[QAPair]) -> bytes:
    """The normalized form qatune stores: one `QAPair.to_record()` a line."""
    lines = (json.dumps(p.to_record(), ensure_ascii=False) for p in pairs)
    return ("\n".join(lines) + "\n").encode()


def read_jsonl(content: str) -> list[QAPair]:
    """Read a file this service wrote (already validated)."""
    return [QAPair.from_record(r) for r in map(json.loads, content.splitlines()) if r]
