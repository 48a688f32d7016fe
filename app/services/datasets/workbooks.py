"""An Excel workbook's sheets as rows of text, read with the standard library.

A .xlsx file is a zip of XML: the workbook names its sheets, its relationships say which
file holds each, and each cell holds a number, a boolean, a formula's cached result,
text of its own or an index into the shared strings; a number's style names the format it
is shown in (a date, a percentage: excel_numbers.py). Only those parts are read. A workbook
is a user's upload: each part's size is capped before it is read (a zip's parts can unpack
to far more than the upload), the sheet is read a row at a time, and XML that is not UTF-8
or declares a DTD (where entities would expand) is refused.
"""

import re
import struct
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from io import BytesIO
from xml.etree import ElementTree

from app.core.language import tr
from app.services.datasets.excel_numbers import BUILTIN, shown

ZIP_MAGIC = b"PK\x03\x04"
OLE_MAGIC = b"\xd0\xcf\x11\xe0"  # an .xls, or a workbook saved with a password
MAX_PART_BYTES = 64 * 1024 * 1024  # one part, unpacked: some 300,000 rows of a sheet
MAX_UNPACKED_BYTES = 256 * 1024 * 1024  # every part read, together: every sheet is read
MAIN = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
RELATIONSHIP = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
PACKAGE = "{http://schemas.openxmlformats.org/package/2006/relationships}"
COLUMN = re.compile(r"[A-Z]{1,3}")
LAST_COLUMN = 16_384  # Excel's XFD

# What a broken or strange zip raises, from its directory to a part's last byte
ZIP_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    struct.error,
    EOFError,
    NotImplementedError,  # a zip version or compression the standard library lacks
    RuntimeError,  # a part with a password
    ValueError,
    OSError,
)
Row = dict[int, str]  # a row's cells that hold something, by 0-based column


class CellError(str):
    """A formula's error as the cell shows it (#N/A, #REF!): no text to train on."""


class WorkbookInvalid(ValueError):
    """Not a workbook this reader can read; the message says why, for the upload's 422."""


def is_workbook(content: bytes, filename: str | None) -> bool:
    named = (filename or "").lower().endswith((".xlsx", ".xlsm", ".xls"))
    return named or content.startswith((ZIP_MAGIC, OLE_MAGIC))


@dataclass(frozen=True)
class Sheet:
    name: str  # as its tab shows it
    part: str  # its XML in the zip
    hidden: bool = False


class Workbook:
    """An uploaded workbook: its sheets in tab order (the hidden ones apart), each read a
    row at a time, with the strings and number formats they share."""

    def __init__(self, content: bytes) -> None:
        if content.startswith(OLE_MAGIC):
            raise WorkbookInvalid(
                tr(
                    "an Excel 97-2003 workbook (.xls) or one saved with a password: save it "
                    "as .xlsx"
                )
            )
        try:
            self.book = _Book(BytesIO(content))
        except ZIP_ERRORS as exc:
            raise WorkbookInvalid(tr("not an Excel workbook (.xlsx): {why}", why=exc)) from exc
        tabs, date1904 = _sheets(self.book)
        self.sheets = [sheet for sheet in tabs if not sheet.hidden]
        self.hidden = [sheet for sheet in tabs if sheet.hidden]
        strings = "xl/sharedStrings.xml"  # absent where no cell holds a shared string
        present = strings in self.book.namelist()
        self.shared = [_runs(s) for s in _elements(self.book, strings, "si")] if present else []
        self.numbers = _Numbers(self.book, date1904=date1904)

    def rows(self, sheet: Sheet) -> Iterator[tuple[int, Row]]:
        """(row number, its cells) of the sheet's rows that hold a cell."""
        position = 0
        for row in _elements(self.book, sheet.part, "row"):
            position += 1
            number = row.get("r", "")
            position = int(number) if number.isascii() and number.isdigit() else position
            cells: Row = {}
            for cell in row.iter(f"{MAIN}c"):
                column = _column(cell.get("r"), max(cells, default=-1) + 1)
                if text := _text(cell, self.shared, self.numbers):
                    cells[column] = text
            if cells:
                yield position, cells


class _Book(zipfile.ZipFile):
    """The workbook's zip, and how many more bytes its parts may unpack to."""

    unpacked_left = MAX_UNPACKED_BYTES


def _sheets(book: _Book) -> tuple[list[Sheet], bool]:
    """The sheets in tab order (a hidden one's part only where it is there), and whether
    the workbook's dates count from 1904: what workbook.xml says, read once."""
    if "xl/workbook.xml" not in book.namelist():  # a zip of the data, or another document
        raise WorkbookInvalid(
            tr("a zip archive, not an Excel workbook (.xlsx): unpack it and upload the file inside")
        )
    tabs, date1904 = [], False
    for element in _elements(book, "xl/workbook.xml", "sheet", "workbookPr"):
        if element.tag == f"{MAIN}workbookPr":
            date1904 = element.get("date1904") in ("1", "true")
        else:
            hidden = element.get("state", "visible") != "visible"
            tabs.append((element.get("name", ""), element.get(RELATIONSHIP), hidden))
    if all(is_hidden for _, _, is_hidden in tabs):
        raise WorkbookInvalid(tr("the workbook has no sheet"))
    targets = {
        link.get("Id"): link.get("Target", "")
        for link in _elements(book, "xl/_rels/workbook.xml.rels", "Relationship", namespace=PACKAGE)
    }
    sheets = []
    for name, link, hidden in tabs:
        if (target := targets.get(link)) is None:
            if hidden:
                continue
            raise WorkbookInvalid(tr("the workbook's sheet {name!r} is missing", name=name))
        part = target.lstrip("/") if target.startswith("/") else f"xl/{target}"
        sheets.append(Sheet(name, part, hidden))
    return sheets, date1904


def _elements(
    book: _Book, name: str, *tags: str, namespace: str = MAIN
) -> Iterator[ElementTree.Element]:
    """Each element of a part with one of `tags` as it is read, cleared after use (a sheet
    of 100,000 rows is not held as a tree); XML that does not parse is the workbook's
    problem."""
    wanted = {f"{namespace}{tag}" for tag in tags}
    data = BytesIO(_part(book, name))
    try:
        for _, element in ElementTree.iterparse(data, events=("end",)):
            if element.tag in wanted:
                yield element
                element.clear()
    except ElementTree.ParseError as exc:
        raise WorkbookInvalid(tr("{part} is not XML: {why}", part=name, why=exc)) from exc
    finally:  # read to its end or not: iterparse's parser holds its source in a cycle
        data.close()


def _runs(item: ElementTree.Element) -> str:
    """A string's text: its <t>, or its formatted runs' (not a phonetic guide's)."""
    guides = {id(t) for guide in item.iter(f"{MAIN}rPh") for t in guide.iter(f"{MAIN}t")}
    return "".join(t.text or "" for t in item.iter(f"{MAIN}t") if id(t) not in guides)


class _Numbers:
    """How the workbook shows its numbers: each style's format code (styles.xml; none
    where it has no styles) and which day its dates count from."""

    def __init__(self, book: _Book, *, date1904: bool) -> None:
        styles = "xl/styles.xml"
        codes: dict[str, str] = {}
        ids: list[str] = []  # each style's format id: one of styles.xml's codes or built in
        if styles in book.namelist():
            for element in _elements(book, styles, "numFmt", "cellXfs"):
                if element.tag == f"{MAIN}numFmt":
                    codes[element.get("numFmtId", "")] = element.get("formatCode", "")
                else:  # cellXfs' xf, not cellStyleXfs'
                    ids += [style.get("numFmtId", "0") for style in element.iter(f"{MAIN}xf")]
        self.formats = [codes.get(number, _builtin(number)) for number in ids]
        self.date1904 = date1904

    def shown(self, value: str, style: str | None) -> str:
        index = int(style) if style and style.isascii() and style.isdigit() else 0
        code = self.formats[index] if index < len(self.formats) else ""
        return shown(value, code, date1904=self.date1904)


def _builtin(number: str) -> str:
    """The code of a built-in format by its id, as excel_numbers.BUILTIN reads it."""
    return BUILTIN.get(int(number) if number.isascii() and number.isdigit() else 0, "")


def _text(cell: ElementTree.Element, shared: list[str], numbers: _Numbers) -> str:
    kind, value = cell.get("t", "n"), cell.findtext(f"{MAIN}v") or ""
    if kind == "inlineStr":
        inline = cell.find(f"{MAIN}is")
        return "" if inline is None else _runs(inline)
    if kind == "s":
        index = int(value) if value.isascii() and value.isdigit() else -1
        if not 0 <= index < len(shared):
            raise WorkbookInvalid(tr("a cell names a shared string the workbook lacks"))
        return shared[index]
    if kind == "b":
        return "TRUE" if value == "1" else "FALSE"
    if kind == "n":
        return numbers.shown(value, cell.get("s"))
    if kind == "d":  # an ISO date, as some writers store one: 2027-01-05T14:00:00
        return value.replace("T", " ")
    if kind == "e":
        return CellError(value)
    return value  # text a formula gave


def _column(reference: str | None, after: int) -> int:
    """The 0-based column of a cell reference ("C5": 2); a cell without one is the next."""
    letters = COLUMN.match(reference or "")
    if letters is None:
        return after
    index = 0
    for letter in letters.group():
        index = index * 26 + ord(letter) - ord("A") + 1
    if index > LAST_COLUMN:
        raise WorkbookInvalid(tr("a cell lies past the last column a sheet has"))
    return index - 1


def _part(book: _Book, name: str) -> bytes:
    try:
        info = book.getinfo(name)
    except KeyError as exc:
        raise WorkbookInvalid(tr("the workbook has no {part}", part=name)) from exc
    if info.file_size > MAX_PART_BYTES:
        raise WorkbookInvalid(tr("{part} unpacks to more than 64 MB", part=name))
    if info.file_size > book.unpacked_left:
        raise WorkbookInvalid(tr("the workbook unpacks to more than 256 MB"))
    try:
        with book.open(info) as part:
            data = part.read(MAX_PART_BYTES + 1)  # the size a zip declares may lie
    except ZIP_ERRORS as exc:
        raise WorkbookInvalid(tr("{part} cannot be unpacked: {why}", part=name, why=exc)) from exc
    if len(data) > MAX_PART_BYTES:
        raise WorkbookInvalid(tr("{part} unpacks to more than 64 MB", part=name))
    book.unpacked_left -= len(data)  # what it held, not what it declared
    if book.unpacked_left < 0:
        raise WorkbookInvalid(tr("the workbook unpacks to more than 256 MB"))
    text = data.removeprefix(b"\xef\xbb\xbf").lstrip()
    if not text.startswith(b"<") or text[1:2] == b"\x00" or b"<!DOCTYPE" in data:
        raise WorkbookInvalid(tr("{part} is not a workbook's XML (UTF-8, no DTD)", part=name))
    return data
