"""Values every schema shares, and the native API's one page shape."""

from typing import Generic, TypeVar

from pydantic import BaseModel

MAX_JSON_INT = 2**53 - 1  # the largest integer a JSON number keeps exactly

Item = TypeVar("Item", bound=BaseModel)


class Page(BaseModel, Generic[Item]):
    """A page of a long list: `total` items in all, these from `offset` on."""

    items: list[Item]
    total: int
    limit: int
    offset: int
