"""Cursor pages over a table: the one way qatune lists things a page at a time."""

from typing import Any, TypeVar

from sqlalchemy import Select
from sqlalchemy.orm import InstrumentedAttribute, Session

Row = TypeVar("Row")


def cursor_page(
    session: Session,
    query: Select[Row],
    key: InstrumentedAttribute[Any],
    *,
    after: int | None,
    limit: int,
    newest_first: bool,
) -> tuple[list[Row], bool]:
    """Up to `limit` rows past the one whose `key` is `after`, in `key`'s order, and whether
    more follow (one more row is read to know)."""
    if after is not None:
        query = query.where(key < after if newest_first else key > after)
    order = key.desc() if newest_first else key.asc()
    found = list(session.scalars(query.order_by(order).limit(limit + 1)))
    return found[:limit], len(found) > limit
