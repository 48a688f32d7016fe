"""Read QA pairs from JSONL, a JSON array or CSV, and report every problem with its place.

Accepted records: {"question", "answer"}; alpaca {"instruction", "input"?, "output"};
chat (OpenAI's fine-tuning format) {"messages": [{"role": "system", ...}?, {"role": "user",
...}, {"role": "assistant", ...}]}. A CSV needs a header with `question` and `answer`
columns.
"""

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from app.core.errors import ValidationFailed
from app.jobs.limits import MAX_FIELD_CHARS, MAX_PAIRS, MAX_REPORTED_PROBLEMS
from app.ml.pairs import QAPair

FORMATS = ("jsonl", "json", "csv")
ACCEPTED = (
    'each record needs "question" and "answer" (or alpaca "instruction"/"output", or chat '
    '"messages": an optional system turn, one user turn and one assistant turn)'
)


@dataclass(frozen=True)
class ParsedQA:
    format: str
    pairs: list[QAPair]


class _Problems:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.total = 0

    def add(
        self, message: str, *, field: str | None = None, at: "Where | None" = None, **where: int
    ) -> None:
        """Where: line=N (JSONL, CSV, bad JSON) or item=N (JSON arrays, inline pairs)."""
        self.total += 1
        if len(self.items) < MAX_REPORTED_PROBLEMS:
            self.items.append({**(at or {}), **where, "field": field, "message": message})

    def raise_if_any(self, what: str) -> None:
        if self.total:
            shown = MAX_REPORTED_PROBLEMS
            more = f" (first {shown} shown)" if self.total > shown else ""
            raise ValidationFailed(
                f"{what} has {self.total} problem(s){more}; fix them and upload again",
                details=self.items,
            )


def detect_format(filename: str | None, text: str) -> str:
    suffix = (filename or "").lower().rsplit(".", 1)[-1] if filename and "." in filename else ""
    if suffix in ("jsonl", "ndjson"):
        return "jsonl"
    if suffix in ("json", "csv"):
        return suffix
    stripped = text.lstrip()
    if stripped.startswith("["):
        return "json"
    if stripped.startswith("{"):
        return "jsonl"
    return "csv"


def parse_qa_bytes(
    content: bytes, *, filename: str | None = None, max_rows: int = MAX_PAIRS
) -> ParsedQA:
    """Parse and validate a whole file; ValidationFailed lists every problem found."""
    problems = _Problems()
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = content[: exc.start].count(b"\n") + 1
        problems.add(
            f"not UTF-8 (byte 0x{content[exc.start]:02x} at offset {exc.start}); save the file "
            "as UTF-8",
            line=line,
        )
        problems.raise_if_any("The file")
        raise AssertionError("unreachable") from exc
    if not text.strip():
        problems.add("the file is empty; it needs at least one question-answer pair", line=1)
        problems.raise_if_any("The file")
    fmt = detect_format(filename, text)
    reader = {"jsonl": _jsonl_records, "json": _json_records, "csv": _csv_records}[fmt]
    pairs: list[QAPair] = []
    for where, record in reader(text, problems):
        pair = normalize_record(record, where, problems)
        if pair is not None:
            pairs.append(pair)
    if len(pairs) + problems.total > max_rows:
        problems.add(
            f"too many rows: {len(pairs) + problems.total}, the limit is {max_rows}; "
            "split the file or raise QATUNE_MAX_DATASET_ROWS"
        )
    if not pairs and not problems.total:
        problems.add("no question-answer pairs found", line=1)
    problems.raise_if_any(f"The {fmt.upper()} file")
    return ParsedQA(fmt, pairs)


Where = dict[str, int]


def _loads(text: str) -> Any:
    """json.loads, with what it cannot hold said as a JSON problem, not raised as a crash."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError(
            "nested too deeply (a QA record is one level)", text, 0
        ) from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise json.JSONDecodeError(f"a number too large to read ({exc})"[:120], text, 0) from None


def _jsonl_records(text: str, problems: _Problems) -> Iterator[tuple[Where, Any]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield {"line": number}, _loads(line)
        except json.JSONDecodeError as exc:
            problems.add(f"invalid JSON: {exc.msg} at column {exc.colno}", line=number)


def _json_records(text: str, problems: _Problems) -> Iterator[tuple[Where, Any]]:
    try:
        data = _loads(text)
    except json.JSONDecodeError as exc:
        problems.add(f"invalid JSON: {exc.msg} at column {exc.colno}", line=exc.lineno)
        return
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        data = data["data"]
    if not isinstance(data, list):
        problems.add("a JSON file must hold an array of records", line=1)
        return
    for index, record in enumerate(data, start=1):
        yield {"item": index}, record


def _csv_records(text: str, problems: _Problems) -> Iterator[tuple[Where, Any]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [name.strip().lower() for name in next(reader)]
    except (StopIteration, csv.Error):
        problems.add("no CSV header", line=1)
        return
    if "question" not in header or "answer" not in header:
        problems.add(
            f"the CSV header must name the columns question and answer; found {header[:6]}",
            line=1,
        )
        return
    q, a = header.index("question"), header.index("answer")
    try:
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            line = reader.line_num
            if len(row) != len(header):
                problems.add(f"{len(row)} columns, the header has {len(header)}", line=line)
                continue
            yield {"line": line}, {"question": row[q], "answer": row[a]}
    except csv.Error as exc:
        problems.add(f"malformed CSV: {exc}", line=reader.line_num)


def normalize_record(record: Any, where: Where, problems: _Problems) -> QAPair | None:
    """One record of any accepted shape → (question, answer), or a reported problem."""
    if not isinstance(record, dict):
        problems.add(f"expected an object, got {type(record).__name__}; {ACCEPTED}", at=where)
        return None
    if "messages" in record:
        return _from_messages(record["messages"], where, problems)
    if "question" in record or "answer" in record:
        fields = {"question": record.get("question"), "answer": record.get("answer")}
    elif "instruction" in record or "output" in record:
        instruction, extra = record.get("instruction"), record.get("input")
        if isinstance(extra, str) and extra.strip() and isinstance(instruction, str):
            instruction = f"{instruction}\n\n{extra}"
        fields = {"instruction": instruction, "output": record.get("output")}
    else:
        problems.add(f"unknown record fields {sorted(record)[:5]}; {ACCEPTED}", at=where)
        return None
    values = [_text_field(name, value, where, problems) for name, value in fields.items()]
    if values[0] is None or values[1] is None:
        return None
    return QAPair(values[0], values[1])


def _text_field(name: str, value: Any, where: Where, problems: _Problems) -> str | None:
    if value is None:
        problems.add(f'missing field "{name}"', field=name, at=where)
    elif not isinstance(value, str):
        problems.add(f'"{name}" must be a string, not {type(value).__name__}', field=name, at=where)
    elif not value.strip():
        problems.add(f'"{name}" is empty', field=name, at=where)
    elif len(value) > MAX_FIELD_CHARS:
        problems.add(
            f'"{name}" is {len(value)} characters; the limit is {MAX_FIELD_CHARS}',
            field=name,
            at=where,
        )
    else:
        return value.strip()
    return None


def _from_messages(messages: Any, where: Where, problems: _Problems) -> QAPair | None:
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        problems.add(
            '"messages" must be a list of {"role", "content"} objects', field="messages", at=where
        )
        return None
    roles = [m.get("role") for m in messages]
    if roles not in (["user", "assistant"], ["system", "user", "assistant"]):
        problems.add(
            f"messages must be an optional system turn, one user turn, then one assistant turn; "
            f"got roles {roles}: split conversations into one pair per record",
            field="messages",
            at=where,
        )
        return None
    system = None
    if roles[0] == "system":
        system = _text_field("messages[0].content", messages[0].get("content"), where, problems)
        if system is None:
            return None
    user, assistant = len(roles) - 2, len(roles) - 1
    question = _text_field(
        f"messages[{user}].content", messages[user].get("content"), where, problems
    )
    answer = _text_field(
        f"messages[{assistant}].content", messages[assistant].get("content"), where, problems
    )
    if question is None or answer is None:
        return None
    return QAPair(question, answer, system)


def validate_pairs(records: list[dict[str, Any]]) -> list[QAPair]:
    """Inline `qa_pairs` of POST /jobs: the same rules as a file, numbered by item."""
    problems = _Problems()
    pairs = []
    for index, record in enumerate(records, start=1):
        pair = normalize_record(record, {"item": index}, problems)
        if pair is not None:
            pairs.append(pair)
    problems.raise_if_any("qa_pairs")
    return pairs


def write_jsonl(pairs: list[QAPair]) -> bytes:
    """The normalized form qatune stores: one {"question", "answer", "system"?} a line."""
    lines = (
        json.dumps(
            {"question": p.question, "answer": p.answer}
            | ({"system": p.system} if p.system else {}),
            ensure_ascii=False,
        )
        for p in pairs
    )
    return ("\n".join(lines) + "\n").encode()


def read_jsonl(content: str) -> list[QAPair]:
    """Read a file this service wrote (already validated)."""
    return [
        QAPair(r["question"], r["answer"], r.get("system"))
        for r in map(json.loads, content.splitlines())
        if r
    ]
