"""Text that came in JSON, checked for what JSON can say and Unicode cannot hold.

JSON's `"\\ud800"` escape decodes to a lone surrogate: a Python string, but no text. UTF-8
cannot carry it, so the database, a response and a tokenizer each fail on it later, far
from the request that brought it. Every reader of a user's JSON asks here first.
"""

import json
import re
from typing import Any

from app.core.language import deferred, tr

Location = tuple[str | int, ...]

NOT_UNICODE = deferred(
    "a lone surrogate (a \\ud800 to \\udfff escape without its pair) is not Unicode "
    "text; send the character itself, or both halves of its pair"
)


def parse_json(text: str | bytes) -> Any:
    """json.loads, with what it cannot hold said as the JSONDecodeError (a ValueError) its
    other faults are: nesting deeper than Python's stack, which json.loads raises as a
    RecursionError, and an integer of more than 4,300 digits. For a user's JSON and a
    model's answer alike, whose readers catch ValueError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", _shown_text(text), 0) from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # an integer of more than 4,300 digits
        message = f"a number too large to read ({exc})"[:120]
        raise json.JSONDecodeError(message, _shown_text(text), 0) from None


def _shown_text(text: str | bytes) -> str:
    return text if isinstance(text, str) else text[:200].decode("utf-8", "replace")


def might_hold_a_surrogate(raw: bytes) -> bool:
    """Whether JSON bytes could decode to a surrogate at all (a search in C, where a walk
    of a large body's every string is not): only through a \\u escape in D800-DFFF, the
    UTF-8-like bytes ED A0-BF that json.loads lets through, or UTF-16 or UTF-32, which
    json.loads reads too and whose ASCII holds NUL bytes."""
    escaped = b"\\ud" in raw or b"\\uD" in raw
    return escaped or b"\x00" in raw or _SURROGATE_BYTES.search(raw) is not None


# A surrogate's code point written the way UTF-8 writes any other (Hangul, at ED 80-9F,
# is not one): the bytes json.loads lets through.
_SURROGATE_BYTES = re.compile(b"\xed[\xa0-\xbf]")


def lone_surrogate_at(value: Any) -> Location | None:
    """Where in `value` the first string or key with a lone surrogate is (() for `value`
    itself), or None. Walked with a stack, each place a link to its parent's: a deep
    document is neither a recursion error nor a copy of its path at every level."""
    stack: list[tuple[_Link, Any]] = [(None, value)]
    while stack:
        at, item = stack.pop()
        if isinstance(item, str):
            if not _is_unicode(item):
                return _location(at)
        elif isinstance(item, dict):
            for key, inner in item.items():
                if isinstance(key, str) and not _is_unicode(key):
                    return _location((at, shown(key)))
                stack.append(((at, key), inner))
        elif isinstance(item, list):
            stack.extend(((at, n), inner) for n, inner in enumerate(item))
    return None


# A place in a document: None for the document, else (the parent's place, key or index).
_Link = tuple["_Link", str | int] | None


def _location(at: _Link) -> Location:
    keys: list[str | int] = []
    while at is not None:
        at, key = at
        keys.append(key)
    return tuple(reversed(keys))


def not_unicode_at(at: Location) -> str:
    """What to say of a lone surrogate at `at`, where no field of its own carries `at`."""
    return f"{dotted(at)}: {tr(NOT_UNICODE)}" if at else tr(NOT_UNICODE)


def dotted(at: Location) -> str:
    """A location as the API names fields: messages.0.content."""
    return ".".join(map(str, at))


def shown(text: str) -> str:
    """`text` with each lone surrogate written as its escape, so that it can be quoted."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _is_unicode(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
