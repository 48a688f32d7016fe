"""Problems found in uploaded records, each with its place, reported all at once."""

from typing import Any

from app.core.errors import ValidationFailed
from app.jobs.limits import MAX_FIELD_CHARS, MAX_REPORTED_PROBLEMS

Where = dict[str, int]  # line=N (JSONL, CSV, bad JSON) or item=N (JSON arrays, inline pairs)


class Problems:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.total = 0

    def add(
        self, message: str, *, field: str | None = None, at: Where | None = None, **where: int
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
                f"{what} has {self.total} problem{'' if self.total == 1 else 's'}{more}; fix "
                f"{'it' if self.total == 1 else 'them'} and upload again",
                details=self.items,
            )


def text_field(name: str, value: Any, where: Where, problems: Problems) -> str | None:
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
