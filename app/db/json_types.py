"""JSON columns that hold typed values: a pydantic-validated value in, the same value out.

The stored JSON is the value's `model_dump(mode="json")`, what these columns held before
they were typed, so no data migration was needed. A column's value is replaced, never
mutated in place (the values are frozen), so SQLAlchemy sees every change.
"""

from typing import Any, ClassVar

from loguru import logger
from pydantic import TypeAdapter, ValidationError
from sqlalchemy import JSON, Dialect
from sqlalchemy.types import TypeDecorator


class TypedJSON(TypeDecorator[Any]):
    """A JSON column of one type (`typed_json` makes one per type: a subclass without
    constructor arguments keeps SQLAlchemy's statement cache)."""

    impl = JSON
    cache_ok = True
    adapter: ClassVar[TypeAdapter[Any]]
    empty: ClassVar[Any]  # what None is stored as: NULL, or {} in a NOT NULL column
    lenient: ClassVar[bool]  # a stored value this version cannot read is None, not an error

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return self.empty
        return self.adapter.dump_python(value, mode="json")

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        if value is None or value == self.empty:
            return None
        try:
            return self.adapter.validate_python(value)
        except ValidationError:
            if not self.lenient:
                raise
            logger.warning("A stored {} could not be read; it is left out", type(self).__name__)
            return None

    def coerce_compared_value(self, op: Any, value: Any) -> Any:
        return JSON()  # compared as plain JSON, never validated as a value


def typed_json(name: str, value_type: Any, *, empty: Any = None, lenient: bool = False) -> Any:
    """A column type for `value_type`; None is stored as `empty`."""
    attributes = {"adapter": TypeAdapter(value_type), "empty": empty, "lenient": lenient}
    return type(name, (TypedJSON,), attributes)()
