"""`string_check`: 1 if the check holds, else 0."""

from typing import Literal

Operation = Literal["eq", "ne", "like", "ilike"]


def string_check(operation: Operation, text: str, reference: str) -> float:
    match operation:
        case "eq":
            held = text == reference
        case "ne":
            held = text != reference
        case "like":  # contains, as OpenAI's docs define it (not SQL's wildcards)
            held = reference in text
        case "ilike":
            held = reference.casefold() in text.casefold()
    return float(held)
