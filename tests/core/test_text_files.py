import codecs

import pytest

from app.core import text_files


def test_utf8_with_or_without_its_mark_and_utf16_with_one_are_text() -> None:
    text = "question\tanswer\nWann?\t9–17 Uhr\n"
    for content in (
        text.encode(),
        codecs.BOM_UTF8 + text.encode(),
        text.encode("utf-16"),  # the machine's order, with its mark
        codecs.BOM_UTF16_LE + text.encode("utf-16-le"),
        codecs.BOM_UTF16_BE + text.encode("utf-16-be"),
    ):
        assert text_files.decode(content) == text


def test_what_is_not_text_is_an_error_with_its_place() -> None:
    for content, start in ((b"ok\n\xe9\n", 3), (codecs.BOM_UTF16_LE + b"o\x00k\x00\x00\xd8", 6)):
        with pytest.raises(UnicodeDecodeError) as caught:
            text_files.decode(content)
        assert caught.value.start == start
        assert text_files.decode_up_to(content, start).count("\n") == (1 if start == 3 else 0)
