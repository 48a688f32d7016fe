"""An uploaded file's bytes as text, read one way for datasets, eval files and suites.

UTF-8, with or without a byte-order mark, or UTF-16 with one: Excel's "Unicode Text" and
Windows Notepad's "Unicode" write that. A UTF-16 file without its mark cannot be told from
other bytes, nor one legacy code page (Latin-1, cp1252) from another: both are refused by
the caller, at the first byte that does not fit.
"""

import codecs

from app.core.language import deferred, tr

UTF16_MARKS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
# Files that are not text, by their first bytes, and what to upload instead: said so, rather
# than "not UTF-8 (byte 0x8b at offset 1)".
NOT_TEXT = (
    (
        (b"\x1f\x8b", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd", b"7z\xbc\xaf\x27\x1c", b"Rar!\x1a\x07"),
        deferred(
            "a compressed file (gzip, xz, zstd, 7z or rar): unpack it and upload the file inside"
        ),
    ),
    (
        (b"PAR1", b"ARROW1"),
        deferred(
            "a Parquet or Arrow table, as the Hugging Face hub stores datasets: write it out as "
            "JSON lines (pandas: to_json(path, orient='records', lines=True)) and upload that"
        ),
    ),
    (
        (b"%PDF-",),
        deferred(
            "a PDF: qatune trains on question-answer files (JSONL, JSON, CSV or Excel), not on "
            "documents; write the document's questions and answers out as one of those"
        ),
    ),
)


def encoding_of(content: bytes) -> str:
    return "utf-16" if content.startswith(UTF16_MARKS) else "utf-8-sig"


def not_text(content: bytes) -> str | None:
    """What the file is and what to upload instead, where its first bytes say it is no
    text file; None for anything else."""
    for marks, why in NOT_TEXT:
        if content.startswith(marks):
            return tr(why)
    return None


class NotText(ValueError):
    """The bytes are no text file: the problem, the line where it shows, and as its message
    both said of the whole file."""

    def __init__(self, problem: str, *, line: int = 1) -> None:
        super().__init__(tr("The file cannot be read: {problem}", problem=problem))
        self.problem = problem
        self.line = line


def read(content: bytes) -> str:
    """The text of an uploaded file; NotText saying what it is instead, or where its
    bytes stop being text and how to save it so that they are."""
    if (what := not_text(content)) is not None:
        raise NotText(tr("this is {what}", what=what))
    try:
        return decode(content)
    except UnicodeDecodeError as exc:
        line = decode_up_to(content, exc.start).count("\n") + 1
        if exc.encoding.startswith("utf-16"):
            raise NotText(
                tr("broken UTF-16 at offset {start}; save the file as UTF-8", start=exc.start),
                line=line,
            ) from exc
        raise NotText(
            tr(
                "not UTF-8 (byte 0x{byte:02x} at offset {start}); save the file as UTF-8",
                byte=content[exc.start],
                start=exc.start,
            ),
            line=line,
        ) from exc


def decode(content: bytes) -> str:
    """The text, without its byte-order mark; UnicodeDecodeError where it is not text."""
    return content.decode(encoding_of(content))


def decode_up_to(content: bytes, end: int) -> str:
    """The text before byte `end`, where decoding stopped: to count the lines before it."""
    return content[:end].decode(encoding_of(content), errors="replace")
