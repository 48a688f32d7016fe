"""An uploaded file's bytes as text, read one way for datasets, eval files and suites.

UTF-8, with or without a byte-order mark, or UTF-16 with one: Excel's "Unicode Text" and
Windows Notepad's "Unicode" write that. A UTF-16 file without its mark cannot be told from
other bytes, nor one legacy code page (Latin-1, cp1252) from another: both are refused by
the caller, at the first byte that does not fit.
"""

import codecs

UTF16_MARKS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def encoding_of(content: bytes) -> str:
    return "utf-16" if content.startswith(UTF16_MARKS) else "utf-8-sig"


def decode(content: bytes) -> str:
    """The text, without its byte-order mark; UnicodeDecodeError where it is not text."""
    return content.decode(encoding_of(content))


def decode_up_to(content: bytes, end: int) -> str:
    """The text before byte `end`, where decoding stopped: to count the lines before it."""
    return content[:end].decode(encoding_of(content), errors="replace")
