"""Where JSON holds a lone surrogate, found at any depth and in keys; a pair is text."""

import json

from app.core.json_text import lone_surrogate_at, might_hold_a_surrogate, not_unicode_at


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


def test_only_a_body_that_could_hold_a_surrogate_is_walked() -> None:
    """Every other body skips the walk: the search is in C, over the bytes."""
    assert not might_hold_a_surrogate('{"q": "中文, 한국어, \\u00e9 and emoji 😀"}'.encode())
    for could in (b'"\\ud83d\\ude00"', b'"\\uDC80"', b'"\xed\xa0\x80"', '"a"'.encode("utf-16")):
        assert might_hold_a_surrogate(could), could
