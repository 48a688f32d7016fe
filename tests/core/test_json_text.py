"""Where JSON holds a lone surrogate, found at any depth and in keys; a pair is text."""

import json

from app.core.json_text import lone_surrogate_at, not_unicode_at


def test_a_lone_surrogate_is_found_where_it_is_and_a_pair_is_text() -> None:
    assert lone_surrogate_at(json.loads('{"a": ["x", {"b": "\\ud83d\\ude00"}]}')) is None
    assert lone_surrogate_at(json.loads('{"a": ["x", {"b": "\\ud83d"}]}')) == ("a", 1, "b")
    assert lone_surrogate_at(json.loads('{"a": {"\\udc80": 1}}')) == ("a", "\\udc80")
    assert lone_surrogate_at("\udfff") == ()
    assert not_unicode_at(()).startswith("a lone surrogate")


def test_a_document_nested_deeper_than_python_recurses_is_walked() -> None:
    deep: object = "\ud800"
    for _ in range(100_000):
        deep = [deep]
    assert lone_surrogate_at(deep) == (0,) * 100_000
