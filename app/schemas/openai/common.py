"""Shapes every /v1 list shares: OpenAI's cursor page."""

from typing import Generic, Literal, TypeVar

from pydantic import BaseModel

Item = TypeVar("Item", bound=BaseModel)


class CursorPage(BaseModel, Generic[Item]):
    """A page of a list; the client asks for the next one with after=<the last id>."""

    object: Literal["list"] = "list"
    data: list[Item]
    has_more: bool
    first_id: str | None = None
    last_id: str | None = None


class Deleted(BaseModel):
    id: str
    object: str
    deleted: bool = True
