"""Where JSON holds a lone surrogate, found at any depth and in keys; a pair is text."""

import json

import pytest

from app.core.json_text import (
    lone_surrogate_at,
    might_hold_a_surrogate,
    not_unicode_at,
    parse_json,
)
from app.graders.model_graders import _result
from app.graders.results import Sample
from app.ml import chat_template
from app.ml.chat_template import CallWriting, FoundCall, find_tool_calls
from app.ml.pairs import ToolCall


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


DEEP = "[" * 100_000 + "]" * 100_000  # deeper than Python's stack


def test_json_nested_too_deeply_or_a_huge_integer_is_a_json_error_not_a_crash() -> None:
    """json.loads raises RecursionError and a bare ValueError for these; every reader of a
    user's JSON or a model's answer catches JSONDecodeError (a ValueError) only."""
    for text, words in ((DEEP, "nested too deeply"), ("1" * 5000, "a number too large")):
        for given in (text, text.encode()):
            with pytest.raises(json.JSONDecodeError, match=words):
                parse_json(given)
    assert parse_json('{"a": [1]}') == {"a": [1]}


def test_a_models_answer_nested_too_deeply_is_text_to_every_reader() -> None:
    """A judge's verdict, a graded answer, a written tool call and a call's arguments: each
    reads the model's JSON, and each took a deep one for a crash."""
    assert Sample.of_text(DEEP).output_json is None
    assert _result('{"result": ' + DEEP + "}") is None
    assert find_tool_calls(DEEP, {"f"}, CallWriting("", "")) == (DEEP, [])
    nested_call = "[" * 5000 + '{"name": "f", "arguments": {}}' + "]" * 5000
    assert find_tool_calls(nested_call, {"f"}, CallWriting("", ""))[1] == [FoundCall("f", "{}")]
    assert ToolCall("f", DEEP).to_message()["function"]["arguments"] == DEEP


def test_the_search_for_tool_calls_reads_an_answer_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each bracket of an answer is tried as the start of a call, and a value that never
    closes is read to the answer's end from each: an answer of 32,000 characters of
    "[1," took 0.86 s of the event loop to read 10,666 times over. The characters read are
    capped at a multiple of the answer's length; a call in an ordinary answer is found."""
    read = []

    class Counted(json.JSONDecoder):
        def raw_decode(self, s: str, idx: int = 0) -> tuple[object, int]:
            try:
                value, end = super().raw_decode(s, idx)
            except json.JSONDecodeError as exc:
                read.append(exc.pos - idx)
                raise
            except RecursionError:  # how far in, it does not say: as far as it could
                read.append(len(s) - idx)
                raise
            read.append(end - idx)
            return value, end

    monkeypatch.setattr(chat_template.json, "JSONDecoder", Counted)
    for answer in ("[1," * 10_666, '{"a":' * 6_400, "[" + "1, " * 10_000 + "{"):
        read.clear()
        assert find_tool_calls(answer, {"f"}, CallWriting("", "")) == (answer, [])
        assert sum(read) <= 40 * len(answer) + 4096, sum(read)  # MAX_READS, 32, and one
    call = '{"name": "f", "arguments": {"city": "Paris"}}'
    answer = "Let me look {that} up [for you]: " + call + " and {then [more"
    found = find_tool_calls(answer, {"f"}, CallWriting("", ""))[1]
    assert found == [FoundCall("f", '{"city": "Paris"}')]
