"""An uploaded file's records, each with its place, whatever the file is: JSON lines, a JSON
array (or an object wrapping one), a CSV with a header, or an Excel workbook's tables.

Which of these a file is, is read from its bytes and what it holds, its name only telling
a CSV: people save a pretty-printed array as .jsonl and JSON lines as .json. A table's
header (a CSV's, a sheet's) may stand below a title or a note, and names its columns
without case as a JSON record names its fields (TABLE_SHAPES): `question` and `answer` (or
`Q` and `A`, 问题 and 答案), `rewording…` columns for other ways to ask, a `system` column
for the row's system prompt; or `prompt` and `completion`, alpaca's `instruction`, `input`
and `output`, a preference pair's `prompt`, `chosen` and `rejected`. A row is the record
its header names; what a record means is qa_parsing.py's.
"""

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from app.core import text_files
from app.core.json_text import parse_json
from app.core.language import said, tr
from app.services.datasets import workbooks
from app.services.datasets.qa_problems import Problems, Where

HEADER_ROWS = 10  # a sheet's rows its header may be in: a title or a note may stand above it
# How a spreadsheet's header may name a question/answer record's fields: in the plural, by
# their initials, in Chinese (the UI's other language)
HEADER_NAMES = {
    "questions": "question",
    "answers": "answer",
    "q": "question",
    "a": "answer",
    "问题": "question",
    "答案": "answer",
}
CSV_DELIMITERS = (",", ";", "\t")
# A question/answer record's own fields (qa_parsing.py reads them without case)
PAIR_FIELDS = frozenset({"question", "answer", "rewordings", "system"})
# The fields that tell a record's shape apart, of every shape read here
RECORD_FIELDS = (
    "question",
    "answer",
    "instruction",
    "output",
    "messages",
    "prompt",
    "completion",
    "chosen",
    "rejected",
    "conversations",
)
# Every field a record of any shape may have: an object with one is a record, not a file's
# wrapper of its records ({"messages": [...]} is a chat; {"faq": [...]} wraps a file)
RECORD_KEYS = (
    frozenset(RECORD_FIELDS)
    | PAIR_FIELDS
    | {"input", "preferred_output", "non_preferred_output", "tools", "functions"}
)


def read_records(
    content: bytes, filename: str | None, problems: Problems
) -> tuple[str, Iterator[tuple[Where, Any]]]:
    """The file's format (jsonl, json, csv, xlsx) and its records as they are read, each
    with its place; a problem where the file is no text or a record cannot be read."""
    if workbooks.is_workbook(content, filename):
        return "xlsx", _workbook_records(content, problems)
    text = _text_of(content, problems)
    fmt = detect_format(filename, text)
    reader = {"jsonl": _jsonl_records, "json": _json_records, "csv": _csv_records}[fmt]
    return fmt, reader(text, problems)


def _column_name(header: str) -> str:
    """The record field a table's column fills, as its header names it: without case or
    outer spaces, in the singular, as a sheet's header is often written ("Questions",
    "Q")."""
    name = header.strip().lower()
    return HEADER_NAMES.get(name, name)


def detect_format(filename: str | None, text: str) -> str:
    """CSV by its name; JSON or JSON lines by what the file holds, whatever it is named
    (a pretty-printed array saved as .jsonl, JSON lines saved as .json): an array is JSON,
    and so are an object written over lines and one that wraps the records on a line of
    its own ({"faq": [...]})."""
    suffix = (filename or "").lower().rsplit(".", 1)[-1] if filename and "." in filename else ""
    if suffix in ("csv", "tsv"):
        return "csv"  # a tab its delimiter, which the header shows
    stripped = text.lstrip()
    if stripped.startswith("["):
        return "json"
    if stripped.startswith("{"):
        first, _, rest = stripped.partition("\n")
        try:
            line = parse_json(first)
        except json.JSONDecodeError:
            return "json"  # an object written over lines
        wrapper = not rest.strip() and isinstance(_records_of(line), list)
        return "json" if wrapper else "jsonl"
    return {"jsonl": "jsonl", "ndjson": "jsonl", "json": "json"}.get(suffix, "csv")


def _text_of(content: bytes, problems: Problems) -> str:
    """A text file's text (text_files.py); its one problem raised when it is none."""
    try:
        text = text_files.read(content)
    except text_files.NotText as exc:
        problems.add(exc.problem, line=exc.line)
        problems.raise_if_any(tr("The file"))
        raise AssertionError("unreachable") from exc
    if (nul := text.find("\x00")) >= 0:  # no text file holds one; UTF-16 without its mark does
        problems.add(
            tr(
                "holds NUL bytes: UTF-16 without its byte-order mark, or not a text file; "
                "save it as UTF-8"
            ),
            line=text.count("\n", 0, nul) + 1,
        )
    if not text.strip():
        problems.add(tr("the file is empty; it needs at least one question-answer pair"), line=1)
    problems.raise_if_any(tr("The file"))
    return text


def _jsonl_records(text: str, problems: Problems) -> Iterator[tuple[Where, Any]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield {"line": number}, parse_json(line)
        except json.JSONDecodeError as exc:
            problems.add(
                tr("invalid JSON: {msg} at column {colno}", msg=exc.msg, colno=exc.colno),
                line=number,
            )


def _json_records(text: str, problems: Problems) -> Iterator[tuple[Where, Any]]:
    try:
        data = parse_json(text)
    except json.JSONDecodeError as exc:
        problems.add(
            tr("invalid JSON: {msg} at column {colno}", msg=exc.msg, colno=exc.colno),
            line=exc.lineno,
        )
        return
    data = _records_of(data)
    if isinstance(data, dict) and {key.strip().lower() for key in data} & RECORD_KEYS:
        data = [data]  # one record, written over lines
    if not isinstance(data, list):
        problems.add(
            tr(
                "a JSON file must hold an array of records, or an object whose one field "
                "holds it ({example})",
                example='{"faq": [...]}',
            ),
            line=1,
        )
        return
    for index, record in enumerate(data, start=1):
        yield {"item": index}, record


def _records_of(document: Any) -> Any:
    """The records of a JSON document: an array, or the array an object wraps, as exports
    write them ({"data": [...]}, or the object's one field: {"faq": [...]}, not a record's
    own list: {"messages": [...]} is a chat); anything else as it is."""
    if isinstance(document, dict):
        if isinstance(document.get("data"), list):
            return document["data"]
        if len(document) == 1:
            key, value = next(iter(document.items()))
            if isinstance(value, list) and key.strip().lower() not in RECORD_KEYS:
                return value
    return document


def _column_count(count: int, header: int, delimiter: str) -> str:
    """A row with a cell too many is most often an answer with the delimiter in it."""
    wrong = tr("{count} columns, the header has {header}", count=count, header=header)
    if count <= header or delimiter == "\t":
        return wrong
    return tr(
        '{wrong}: put a cell that holds {mark} in double quotes ("Yes{delimiter} we do")',
        wrong=wrong,
        mark=repr(delimiter),
        delimiter=delimiter,
    )


def csv_header(text: str) -> tuple[str, int]:
    """The delimiter that makes a line name both columns (a comma, the semicolon Excel
    writes where a comma is the decimal mark, or a tab: TSV, Excel's Unicode text), and how
    many lines stand above that header (a title, a note: at most HEADER_ROWS - 1).
    Neither found: a comma, and the first line."""
    for above, line in enumerate(text.split("\n", HEADER_ROWS)[:HEADER_ROWS]):
        for delimiter in CSV_DELIMITERS:
            try:
                header = next(csv.reader([line], delimiter=delimiter), [])
            except csv.Error:  # a header over the field size limit: the reader says so
                return ",", 0
            if _columns(dict(enumerate(header))) is not None:
                return delimiter, above
    return ",", 0


def _csv_records(text: str, problems: Problems) -> Iterator[tuple[Where, Any]]:
    delimiter, above = csv_header(text)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        for _ in range(above):  # a title or a note, as a sheet saved as CSV may have
            next(reader)
        header = next(reader)
    except (StopIteration, csv.Error):
        problems.add(tr("no CSV header"), line=1)
        return
    named = dict(enumerate(header))
    columns = _columns(named)
    if columns is None:
        problems.add(
            tr(
                "the CSV header must name the columns question and answer (or prompt and "
                "completion; instruction and output; prompt, chosen and rejected), separated "
                "by commas, semicolons or tabs; found {header}",
                header=header[:6],
            ),
            line=1,
        )
        return
    _note_unread(columns, named, problems, sheet="")
    try:
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            line = reader.line_num
            if len(row) != len(header):
                problems.add(_column_count(len(row), len(header), delimiter), line=line)
                continue
            yield {"line": line}, columns.record(dict(enumerate(row)))
    except csv.Error as exc:
        problems.add(tr("malformed CSV: {exc}", exc=exc), line=reader.line_num)


def _workbook_records(content: bytes, problems: Problems) -> Iterator[tuple[Where, Any]]:
    """An Excel workbook's tables, a CSV's each: every visible sheet with a row that names
    the columns among its first HEADER_ROWS (a title or a note may stand above it; a FAQ
    kept a topic a tab). Each row after it is a record, numbered as the sheet numbers it,
    and named by its sheet where the workbook has more than one. A sheet of notes is passed
    over, and so is a hidden one: each is said in a note where it holds what may have been
    meant to be read."""
    try:
        book = workbooks.Workbook(content)
        tables, passed_over = 0, []
        for sheet in book.sheets:
            rows = book.rows(sheet)  # its header, then its records: the sheet is read once
            header, columns = _table_header(rows)
            if columns is None:
                if header:
                    passed_over.append((sheet.name, header))
                continue
            tables += 1
            _note_unread(columns, header, problems, sheet.name if len(book.sheets) > 1 else "")
            for number, cells in rows:
                where: Where = {"line": number}
                if len(book.sheets) > 1:
                    where = {"sheet": sheet.name[:100], **where}  # Excel allows 31
                if not any(text.strip() for text in cells.values()):
                    continue
                if (error := columns.cell_error(cells)) is not None:
                    problems.add(
                        tr(
                            "{field} is Excel's error {error}: fix the cell's formula, or type "
                            "the text in",
                            field=error[0],
                            error=error[1],
                        ),
                        field=error[0],
                        at=where,
                    )
                    continue
                yield where, columns.record(cells)
        hidden = [sheet.name for sheet in book.hidden if _holds_a_table(book, sheet)]
        if tables:
            for name, cells in passed_over:
                problems.notes.append(
                    said(
                        "the sheet {name!r} was passed over: none of its first {rows} rows "
                        "names a table's columns; its first row holds {header}",
                        name=name,
                        rows=HEADER_ROWS,
                        header=str(_names(cells)),
                    )
                )
            problems.notes.extend(
                said(
                    "the hidden sheet {name!r} holds a table that was not read: unhide the "
                    "sheet and upload again to train on its rows",
                    name=name,
                )
                for name in hidden
            )
        elif hidden:
            problems.add(
                tr(
                    "the workbook's table is on the hidden sheet {name!r}: unhide the sheet "
                    "and upload again",
                    name=hidden[0],
                ),
                line=1,
            )
        else:
            first = next(book.rows(book.sheets[0]), None)
            problems.add(
                tr(
                    "no sheet of the workbook names the columns question and answer (or "
                    "prompt and completion; instruction and output; prompt, chosen and "
                    "rejected) in a row of its first {rows}; the first sheet's first row "
                    "holds {header}",
                    rows=HEADER_ROWS,
                    header=_names(first[1]) if first else [],
                ),
                line=first[0] if first else 1,
            )
    except workbooks.WorkbookInvalid as exc:
        problems.add(str(exc), line=1)


@dataclass(frozen=True)
class _Shape:
    """A record a table's row may be: the fields its header must name, the ones it may,
    whether it takes rewordings, and the fields read under another's name (a prompt and
    completion in text are a question and its answer: a system prompt and rewordings too)."""

    needs: tuple[str, ...]
    may: tuple[str, ...] = ()
    rewordings: bool = True
    renamed: tuple[tuple[str, str], ...] = ()


# The records a table's rows may be, by the columns its header names; the first that fits
TABLE_SHAPES = (
    _Shape(("question", "answer"), ("system",)),
    _Shape(("prompt", "chosen", "rejected"), rewordings=False),
    _Shape(
        ("prompt", "completion"),
        ("system",),
        renamed=(("prompt", "question"), ("completion", "answer")),
    ),
    _Shape(("instruction", "output"), ("input", "system")),
)


@dataclass(frozen=True)
class _Columns:
    """Where a table's record fields are: the column of each field its header names (one it
    may name is written only where the row's cell holds text), and a column per rewording
    ("rewording 1", "rewording 2", ...), or one "rewordings" column with one a line (a
    spreadsheet's cell holds lines: Alt+Enter)."""

    needed: dict[str, int]
    optional: dict[str, int]
    reworded: list[int]
    readable: list[str]  # the fields a row of its shape is read from, for a note

    def unread(self, header: dict[int, str]) -> list[str]:
        """The header's names of the columns no field is read from ("Category", "Notes")."""
        read = {*self.needed.values(), *self.optional.values(), *self.reworded}
        return [
            name.strip() for column, name in header.items() if column not in read and name.strip()
        ]

    def record(self, cells: dict[int, str]) -> dict[str, Any]:
        record: dict[str, Any] = {
            field: cells.get(column, "") for field, column in self.needed.items()
        }
        record |= {
            field: cells[column]
            for field, column in self.optional.items()
            if cells.get(column, "").strip()
        }
        if rewordings := [
            text for i in self.reworded for text in cells.get(i, "").splitlines() if text.strip()
        ]:
            record["rewordings"] = rewordings
        return record

    def cell_error(self, cells: dict[int, str]) -> tuple[str, str] | None:
        """The first of the row's cells read that holds a formula's error: (field, error)."""
        read = [*self.needed.items(), *self.optional.items()]
        read += [("rewordings", column) for column in self.reworded]
        for field, column in read:
            if isinstance(cells.get(column), workbooks.CellError):
                return field, cells[column]
        return None


def _columns(header: dict[int, str]) -> _Columns | None:
    """The columns a header names, matched without case; None where it names no record."""
    names = {column: _column_name(name) for column, name in header.items()}
    found: dict[str, int] = {}
    for own_name in (False, True):  # the first wins, and a field's own name over "A"
        for column, name in reversed(names.items()):
            if (header[column].strip().lower() == name) is own_name:
                found[name] = column
    shape = next((shape for shape in TABLE_SHAPES if set(shape.needs) <= found.keys()), None)
    if shape is None:
        return None
    field = dict(shape.renamed)
    reworded = [column for column, name in names.items() if name.startswith("rewording")]
    return _Columns(
        {field.get(name, name): found[name] for name in shape.needs},
        {field.get(name, name): found[name] for name in shape.may if name in found},
        reworded if shape.rewordings else [],
        [*shape.needs, *shape.may, *(["rewording…"] if shape.rewordings else [])],
    )


def _note_unread(columns: _Columns, header: dict[int, str], problems: Problems, sheet: str) -> None:
    """Say which of a table's columns were not read, where any were (of a sheet's table,
    with its name where the workbook has more than one)."""
    if unread := columns.unread(header):
        note = said(
            "the columns {names} were not read: a row is read from {fields}",
            names=str(unread[:6]),
            fields=", ".join(columns.readable),
        )
        problems.notes.append(
            said("sheet {name!r}: {note}", name=sheet, note=note) if sheet else note
        )


def _table_header(
    rows: Iterator[tuple[int, workbooks.Row]],
) -> tuple[workbooks.Row, _Columns | None]:
    """The first of a sheet's first HEADER_ROWS rows that names a table's columns, and
    them, the rows after it left to read; else its first row (empty where it has none)."""
    first: workbooks.Row = {}
    for _, cells in islice(rows, HEADER_ROWS):
        if (columns := _columns(cells)) is not None:
            return cells, columns
        first = first or cells
    return first, None


def _holds_a_table(book: workbooks.Workbook, sheet: workbooks.Sheet) -> bool:
    """Whether a hidden sheet names a table's columns (one that cannot be read holds none
    worth a word: it was never going to be read)."""
    try:
        return _table_header(book.rows(sheet))[1] is not None
    except workbooks.WorkbookInvalid:
        return False


def _names(cells: workbooks.Row) -> list[str]:
    """A row's first cells as a note or a problem quotes them."""
    return [name for _, name in sorted(cells.items())][:6]
