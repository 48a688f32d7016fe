"""Problems found in uploaded records, each with its place, reported all at once."""

from typing import Any

from app.core.errors import ValidationFailed
from app.core.language import Sentence, tr
from app.jobs.limits import MAX_FIELD_CHARS, MAX_REPORTED_PROBLEMS

# line=N (JSONL, CSV, bad JSON), item=N (JSON arrays, inline pairs); a workbook's rows also
# name their sheet where it has several tables
Where = dict[str, int | str]


class Problems:
    """What is wrong with a file, each with its place, and what reading it passed over
    (`notes`: a sheet that names no table, a column no record field is named by), said
    beside the upload rather than refusing it."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.total = 0
        self.notes: list[Sentence] = []  # kept as sentences: read in the reader's language

    def add(
        self, message: str, *, field: str | None = None, at: Where | None = None, **where: int
    ) -> None:
        """Where: line=N (JSONL, CSV, bad JSON) or item=N (JSON arrays, inline pairs)."""
        self.total += 1
        if len(self.items) < MAX_REPORTED_PROBLEMS:
            self.items.append({**(at or {}), **where, "field": field, "message": message})

    def raise_if_any(self, what: str) -> None:
        """Raise ValidationFailed with every problem found in `what` ("The file"), if any."""
        if self.total == 1:
            raise ValidationFailed(
                tr("{what} has 1 problem; fix it and upload again", what=what), details=self.items
            )
        if self.total:
            more = (
                tr(" (the first {shown} are listed)", shown=MAX_REPORTED_PROBLEMS)
                if self.total > MAX_REPORTED_PROBLEMS
                else ""
            )
            raise ValidationFailed(
                tr(
                    "{what} has {total} problems{more}; fix them and upload again",
                    what=what,
                    total=self.total,
                    more=more,
                ),
                details=self.items,
            )


def json_kind(value: Any) -> str:
    """What a JSON value is, in words (not Python's type names)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return tr("true or false")
    if isinstance(value, int | float):
        return tr("a number")
    if isinstance(value, str):
        return tr("text")
    return tr("a list") if isinstance(value, list) else tr("an object")


def text_field(name: str, value: Any, where: Where, problems: Problems) -> str | None:
    if value is None:
        problems.add(tr('missing field "{name}"', name=name), field=name, at=where)
    elif not isinstance(value, str):
        problems.add(
            tr('"{name}" must be text, not {kind}', name=name, kind=json_kind(value)),
            field=name,
            at=where,
        )
    elif not value.strip():
        problems.add(tr('"{name}" is empty', name=name), field=name, at=where)
    elif len(value) > MAX_FIELD_CHARS:
        problems.add(
            tr(
                '"{name}" is {count} characters; the limit is {limit}',
                name=name,
                count=len(value),
                limit=MAX_FIELD_CHARS,
            ),
            field=name,
            at=where,
        )
    else:
        return value.strip()
    return None


def answers_differ(
    preferred: str, rejected: str, field: str, where: Where, problems: Problems
) -> bool:
    """A preference pair teaches only where its two answers differ; `field` is the rejected
    one's name in the record."""
    if preferred == rejected:
        problems.add(
            tr("{field} is the same as the preferred answer: nothing to learn", field=field),
            field=field,
            at=where,
        )
    return preferred != rejected
