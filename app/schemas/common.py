"""Values every schema shares, and the native API's one page shape."""

from typing import Annotated, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, Field

from app.core.errors import NUL_REFUSED
from app.core.language import tr

MAX_JSON_INT = 2**53 - 1  # the largest integer a JSON number keeps exactly


def _without_nul(text: str) -> str:
    """A job's labels are read back as text by the database (the metadata filter), which
    PostgreSQL cannot do for a NUL: refused here as every plain-text column refuses it."""
    if "\x00" in text:
        raise ValueError(tr(NUL_REFUSED))
    return text


# A job's own labels, OpenAI's "metadata": up to 16 of these keys and values.
Label = Annotated[str, Field(max_length=64), AfterValidator(_without_nul)]
LabelValue = Annotated[str, Field(max_length=512), AfterValidator(_without_nul)]

Item = TypeVar("Item", bound=BaseModel)


class Page(BaseModel, Generic[Item]):
    """A page of a long list: `total` items in all, these from `offset` on."""

    items: list[Item]
    total: int
    limit: int
    offset: int
