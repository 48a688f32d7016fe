"""Shapes every /v1 list shares: OpenAI's cursor page, of things that have an id."""

from collections.abc import Sequence
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, Field


class Listed(BaseModel):
    """A thing a /v1 list holds: its id is the cursor (`after`) for the page after it."""

    id: str


Item = TypeVar("Item", bound=Listed)


class ListQuery(BaseModel):
    """The query of an eval's lists (evals, runs, output items): the page after the one
    whose id is `after`, at most `limit` long, oldest first unless `order` is desc."""

    after: str | None = Field(default=None, max_length=64)
    limit: int = Field(default=20, ge=1, le=100)
    order: Literal["asc", "desc"] = "asc"

    @property
    def newest_first(self) -> bool:
        return self.order == "desc"


class CursorPage(BaseModel, Generic[Item]):
    """A page of a list; the client asks for the next one with after=<the last id>."""

    object: Literal["list"] = "list"
    data: list[Item]
    has_more: bool
    first_id: str | None = None
    last_id: str | None = None

    @classmethod
    def of(cls, data: Sequence[Item], has_more: bool) -> "CursorPage[Item]":
        """The one way a page is made: its first and last ids from its items."""
        return cls(
            data=list(data),
            has_more=has_more,
            first_id=data[0].id if data else None,
            last_id=data[-1].id if data else None,
        )


class Deleted(BaseModel):
    id: str
    object: str
    deleted: bool = True
