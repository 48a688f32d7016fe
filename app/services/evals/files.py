"""An eval's data as a file: what OpenAI's API takes with `purpose="evals"` and exports.

Each line is one item, `{"item": {...}}`, with `"sample": {...}` where a run already has
the model's answer; a line that is a bare object is an item too. A file of QA pairs
uploaded for fine-tuning serves as eval data as well (each record its item). Problems are
named by line, all of them, as a fine-tuning file's are.
"""

from typing import Any

from app.core import text_files
from app.core.errors import ValidationFailed
from app.core.json_text import lone_surrogate_at, not_unicode_at, parse_json
from app.core.language import tr
from app.graders.evals import Row

ROW_FIELDS = frozenset({"item", "sample"})


def records_of(content: bytes) -> list[Any] | None:
    """JSON lines or a JSON array; None for anything else (CSV)."""
    try:
        text = text_files.decode(content).strip()
    except UnicodeDecodeError:
        return None
    try:
        whole = parse_json(text)
        return whole if isinstance(whole, list) else [whole]
    except ValueError:
        pass
    try:
        return [parse_json(line) for line in text.splitlines() if line.strip()]
    except ValueError:
        return None


def row_of(record: Any) -> Row | str:
    """The record as an item (and its sample), or what is wrong with it."""
    if not isinstance(record, dict):
        return tr("is not a JSON object: give {example}", example='{"item": {...}}')
    if (at := lone_surrogate_at(record)) is not None:
        return not_unicode_at(at)
    if "item" not in record:
        return Row(item=record)
    unknown = sorted(set(record) - ROW_FIELDS)
    if unknown:
        return tr(
            "has {fields} beside item: a line holds item and, optionally, sample",
            fields=", ".join(unknown),
        )
    item, sample = record["item"], record.get("sample")
    if not isinstance(item, dict):
        return tr("item is not a JSON object")
    if sample is not None and not isinstance(sample, dict):
        return tr("sample is not a JSON object")
    return Row(item=item, sample=sample)


def parse_eval_file(content: bytes, *, max_rows: int) -> list[Row]:
    """Every line's row; ValidationFailed naming each bad line (the first 50)."""
    try:
        text = text_files.read(content)
    except text_files.NotText as exc:
        raise ValidationFailed(str(exc)) from exc
    rows: list[Row] = []
    problems: list[dict[str, Any]] = []
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    for number, line in lines:
        try:
            found = row_of(parse_json(line))
        except ValueError as exc:
            found = tr("is not valid JSON ({reason})", reason=str(exc))
        if isinstance(found, str):
            problems.append({"line": number, "message": found})
        else:
            rows.append(found)
    if problems:
        raise ValidationFailed(
            tr("The eval file has {count} bad lines", count=len(problems)), details=problems[:50]
        )
    if not rows:
        raise ValidationFailed(
            tr(
                "The eval file holds no items: one JSON object a line, {example}",
                example='{"item": {"question": "...", "answer": "..."}}',
            ),  # fmt: skip
        )
    if len(rows) > max_rows:
        raise ValidationFailed(
            tr(
                "The eval file has {count} items, more than the {limit} allowed "
                "(QATUNE_MAX_DATASET_ROWS)",
                count=len(rows),
                limit=max_rows,
            )
        )
    return rows
