"""An Excel workbook uploads as its CSV would: openpyxl's workbooks, Excel's shared strings
and rich text, and workbooks built to hurt (a zip bomb, entities, a cell past the last
column) refused with a line, not read."""

import io
import tracemalloc
import zipfile
from datetime import date, datetime, time

import openpyxl
import pytest
from openpyxl.utils.datetime import CALENDAR_MAC_1904, CALENDAR_WINDOWS_1900

from app.core.errors import ValidationFailed
from app.ml.pairs import QAPair
from app.services.datasets.qa_parsing import parse_qa_bytes

MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
RELATIONSHIPS = "http://schemas.openxmlformats.org"
WORKBOOK = (
    f'<workbook xmlns="{MAIN}" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/'
    'relationships"><sheets><sheet name="FAQ" sheetId="1" r:id="rId1"/></sheets></workbook>'
)
LINKS = (
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
    'relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>'
)


def workbook(sheet: str, shared: str | None = None, parts: dict[str, str] | None = None) -> bytes:
    """A workbook as Excel writes one: shared strings, relative targets."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as book:
        book.writestr("xl/workbook.xml", WORKBOOK)
        book.writestr("xl/_rels/workbook.xml.rels", LINKS)
        book.writestr(
            "xl/worksheets/sheet1.xml",
            f'<worksheet xmlns="{MAIN}"><sheetData>{sheet}</sheetData></worksheet>',
        )
        if shared is not None:
            book.writestr("xl/sharedStrings.xml", f'<sst xmlns="{MAIN}">{shared}</sst>')
        for name, text in (parts or {}).items():
            book.writestr(name, text)
    return out.getvalue()


def problems(content: bytes) -> list[str]:
    with pytest.raises(ValidationFailed) as caught:
        parse_qa_bytes(content, filename="faq.xlsx")
    return [f"{p.get('line')}: {p['message']}" for p in caught.value.details]


def test_a_workbook_openpyxl_writes_is_read_as_its_csv_would_be() -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["Question", "Answer", "Rewording 1"])
    sheet.append(["What is the Wi-Fi password?", "harbor2024", "What's the Wi-Fi code?"])
    sheet.append([None, None, None])  # a blank row between
    sheet.append(["How much is a latte?", 3.5, None])
    sheet.append(["How many seats?", 42, None])
    sheet.append(["Opening hours?", None, None])  # no answer: a problem on its row
    saved = io.BytesIO()
    book.save(saved)
    found = problems(saved.getvalue())
    assert found == ['6: "answer" is empty']
    sheet.delete_rows(6)
    book.save(saved := io.BytesIO())
    parsed = parse_qa_bytes(saved.getvalue(), filename="faq.xlsx")
    assert parsed.format == "xlsx"
    assert parsed.pairs == [
        QAPair("What is the Wi-Fi password?", "harbor2024"),
        QAPair("What's the Wi-Fi code?", "harbor2024"),
        QAPair("How much is a latte?", "3.5"),
        QAPair("How many seats?", "42"),
    ]


def test_dates_times_percentages_and_fractions_read_as_excel_shows_them() -> None:
    """Not the serial number a date is stored as (46015), nor 0.15 for 15%, nor the float
    that 0.1 + 0.2 is stored as: what the user sees in the cell, dates in ISO form."""
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["Question", "Answer"])
    rows = [
        ("When does the sale end?", date(2025, 12, 24), None, "2025-12-24"),
        ("When do doors open?", time(9, 30), None, "09:30:00"),
        ("When is the launch?", datetime(2027, 1, 5, 14, 0), "d mmm yyyy h:mm", "2027-01-05 14:00"),
        ("How long is the tour?", time(1, 15, 30), "[h]:mm:ss", "01:15:30"),
        ("What month is the fair?", date(2026, 3, 1), "mmmm yyyy", "2026-03-01"),
        ("What is the discount?", 0.15, "0%", "15%"),
        ("What is the VAT?", 0.075, "0.0%", "7.5%"),
        ("What is the total?", 0.1 + 0.2, None, "0.3"),
        ("What is the fee?", 12.5, '"€"#,##0.00', "€12.50"),
        ("What does the big one cost?", 1234.5, "#,##0.00 [$€-407]", "1,234.50 €"),
        ("What is the refund?", -5, "$#,##0.00_);($#,##0.00)", "($5.00)"),
        ("What is the ZIP code?", 501, "00000", "00501"),
        ("How heavy is it?", 2.5, '0.0" kg"', "2.5 kg"),
        ("What is the late fee?", 0, '0.00;-0.00;"none"', "none"),
        ("What is Avogadro's number?", 6.02214076e23, "0.00E+00", "6.02214076e+23"),
        ("How many seats?", 42, "0", "42"),
        ("How many rooms?", 12, "0." + "0" * 300, "12"),  # longer than Excel allows: General
        ("What is pi?", 3.14159, None, "3.14159"),
    ]
    for number, (question, answer, shown_as, _) in enumerate(rows, 2):
        sheet.append([question, answer])
        if shown_as is not None:
            sheet.cell(number, 2).number_format = shown_as
    iso = openpyxl.Workbook(iso_dates=True)  # t="d": the date as text, in ISO form
    assert iso.active is not None
    iso.active.append(["question", "answer"])
    iso.active.append(["When is the launch?", datetime(2027, 1, 5, 14, 0)])
    iso.save(saved := io.BytesIO())
    parsed = parse_qa_bytes(saved.getvalue(), filename="faq.xlsx")
    assert parsed.pairs == [QAPair("When is the launch?", "2027-01-05 14:00:00")]
    for epoch in (CALENDAR_WINDOWS_1900, CALENDAR_MAC_1904):
        book.epoch = epoch
        saved = io.BytesIO()
        book.save(saved)
        parsed = parse_qa_bytes(saved.getvalue(), filename="faq.xlsx")
        assert parsed.pairs == [QAPair(question, text) for question, _, _, text in rows]


def test_every_sheet_with_a_question_and_answer_header_is_read() -> None:
    """A FAQ kept a topic a tab is read whole, not its first tab; a sheet of notes or a
    hidden one is passed over, and a problem names the sheet it is on."""
    book = openpyxl.Workbook()
    notes = book.active
    assert notes is not None
    notes.title = "Read me"
    notes.append(["This workbook holds the shop's FAQ, a topic a sheet."])
    shipping = book.create_sheet("Shipping")
    shipping.append(["Questions", "Answers"])  # the plural, as headers are often written
    shipping.append(["How long does delivery take?", "Two to four working days."])
    returns = book.create_sheet("Returns")
    returns.append(["Returns and refunds"])  # a title, and a note, above the table
    returns.append(["Updated by the front desk every Monday."])
    returns.append(["Question", "Answer", "Rewording 1"])
    returns.append(["Can I return a gift?", "Yes, within 30 days.", "May gifts go back?"])
    old = book.create_sheet("Old answers")
    old.append(["question", "answer"])
    old.append(["Do you ship to Mars?", "Not yet."])
    old.sheet_state = "hidden"
    saved = io.BytesIO()
    book.save(saved)
    assert parse_qa_bytes(saved.getvalue(), filename="faq.xlsx").pairs == [
        QAPair("How long does delivery take?", "Two to four working days."),
        QAPair("Can I return a gift?", "Yes, within 30 days."),
        QAPair("May gifts go back?", "Yes, within 30 days."),
    ]
    returns.append(["Is there a restocking fee?", None])
    book.save(saved := io.BytesIO())
    with pytest.raises(ValidationFailed) as caught:
        parse_qa_bytes(saved.getvalue(), filename="faq.xlsx")
    assert [(p["sheet"], p["line"]) for p in caught.value.details] == [("Returns", 5)]


def test_what_a_workbook_passes_over_is_said_in_a_note() -> None:
    """A sheet without a table, a hidden sheet with one, and a column no field is read
    from: the upload goes on, and each is said beside it, where a row the user meant to
    train may be. A workbook whose only table is hidden is refused, saying where it is."""
    book = openpyxl.Workbook()
    faq = book.active
    assert faq is not None
    faq.title = "FAQ"
    faq.append(["Question", "Answer", "Category", None, "Alternative question"])
    faq.append(["Is there parking?", "Yes, behind the shop.", "Visits", None, "Can I park?"])
    notes = book.create_sheet("More questions")
    notes.append(["Frage", "Antwort"])  # a table, in words qatune does not read
    notes.append(["Gibt es WLAN?", "Ja."])
    old = book.create_sheet("Old answers")
    old.append(["question", "answer"])
    old.append(["Do you ship to Mars?", "Not yet."])
    old.sheet_state = "hidden"
    book.create_sheet("Empty")
    saved = io.BytesIO()
    book.save(saved)
    parsed = parse_qa_bytes(saved.getvalue(), filename="faq.xlsx")
    assert parsed.pairs == [QAPair("Is there parking?", "Yes, behind the shop.")]
    assert [note.text() for note in parsed.notes] == [
        "sheet 'FAQ': the columns ['Category', 'Alternative question'] were not read: a row "
        "is read from question, answer, system, rewording…",
        "the sheet 'More questions' was passed over: none of its first 10 rows names a "
        "table's columns; its first row holds ['Frage', 'Antwort']",
        "the hidden sheet 'Old answers' holds a table that was not read: unhide the sheet and "
        "upload again to train on its rows",
    ]
    del book["FAQ"], book["More questions"]  # an empty sheet showing, the table hidden
    book.save(saved := io.BytesIO())
    assert problems(saved.getvalue()) == [
        "1: the workbook's table is on the hidden sheet 'Old answers': unhide the sheet and "
        "upload again"
    ]


def test_a_table_is_read_as_the_record_its_header_names() -> None:
    """A sheet's header names a record as a JSON file's fields do: prompt and completion,
    alpaca's instruction, input and output, a preference pair; and a question and answer
    as a spreadsheet often heads them (Q and A, in Chinese)."""
    tables = {
        ("Prompt", "Completion", "System"): ["Opening hours?", "9 to 5.", "Be brief."],
        ("instruction", "input", "output"): ["Translate to French.", "Good morning", "Bonjour"],
        ("Q", "A"): ["Is there parking?", "Yes."],
        ("问题", "答案"): ["有停车位吗？", "有。"],
    }
    read = []
    for header, row in tables.items():
        book = openpyxl.Workbook()
        sheet = book.active
        assert sheet is not None
        sheet.append(header)
        sheet.append(row)
        book.save(saved := io.BytesIO())
        parsed = parse_qa_bytes(saved.getvalue(), filename="faq.xlsx")
        assert parsed.notes == []
        read += parsed.pairs
    assert read == [
        QAPair("Opening hours?", "9 to 5.", "Be brief."),
        QAPair("Translate to French.\n\nGood morning", "Bonjour"),
        QAPair("Is there parking?", "Yes."),
        QAPair("有停车位吗？", "有。"),
    ]


def test_a_formulas_error_in_a_cell_read_is_a_problem_on_its_row() -> None:
    """#N/A from a VLOOKUP is no answer to train: the row is named, not trained on it."""
    sheet = (
        '<row r="1"><c t="inlineStr"><is><t>question</t></is></c>'
        '<c t="inlineStr"><is><t>answer</t></is></c><c t="inlineStr"><is><t>note</t></is></c></row>'
        '<row r="2"><c t="inlineStr"><is><t>Open?</t></is></c><c t="e"><f>VLOOKUP(A2,X,2)</f>'
        "<v>#N/A</v></c></row>"
        '<row r="3"><c t="inlineStr"><is><t>Parking?</t></is></c><c t="inlineStr"><is><t>Yes'
        '</t></is></c><c t="e"><v>#REF!</v></c></row>'  # in a column not read: no matter
    )
    assert problems(workbook(sheet)) == [
        "2: answer is Excel's error #N/A: fix the cell's formula, or type the text in"
    ]
    fixed = sheet.replace('<c t="e"><f>VLOOKUP(A2,X,2)</f><v>#N/A</v></c>', "")
    fixed = fixed.replace("<t>Open?</t></is></c>", "<t>Open?</t></is></c><c><v>1</v></c>")
    assert [p.answer for p in parse_qa_bytes(workbook(fixed), filename="faq.xlsx").pairs] == [
        "1",
        "Yes",
    ]


def test_excels_shared_strings_rich_text_and_formulas_are_text() -> None:
    shared = (
        "<si><t>question</t></si><si><t>answer</t></si>"
        "<si><r><t>Where is </t></r><r><rPr><b/></rPr><t>the hall</t></r><r><t>?</t></r></si>"
        '<si><t>東京</t><rPh sb="0" eb="2"><t>トウキョウ</t></rPh></si>'
    )
    sheet = (
        '<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c></row>'
        '<row r="3"><c r="A3" t="s"><v>2</v></c><c r="B3" t="s"><v>3</v></c></row>'
        '<row r="4"><c t="str"><f>A3</f><v>Again?</v></c><c><v>7.0</v></c></row>'  # no r
        '<row r="5"><c r="B5" t="b"><v>1</v></c>'  # cells out of order
        '<c r="A5" t="inlineStr"><is><t>Open?</t></is></c></row>'
    )
    assert parse_qa_bytes(workbook(sheet, shared), filename="faq.xlsx").pairs == [
        QAPair("Where is the hall?", "東京"),
        QAPair("Again?", "7"),
        QAPair("Open?", "TRUE"),
    ]
    # Sniffed without a name, as a zip
    assert parse_qa_bytes(workbook(sheet, shared)).format == "xlsx"


def test_a_workbook_of_many_large_sheets_is_refused_once_it_unpacks_too_far() -> None:
    """Every sheet is read, so a 0.5 MB upload of 8 sheets of 50 MB each (no table in their
    first rows) unpacked 400 MB, and held each sheet's XML until the garbage collector ran
    (1.2 GB at its peak with 40 of them): the parts read are counted, and a sheet passed over
    lets its XML go."""
    sheets = range(1, 9)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as book:
        book.writestr(
            "xl/workbook.xml",
            f'<workbook xmlns="{MAIN}" xmlns:r="{RELATIONSHIPS}/officeDocument/2006/'
            'relationships"><sheets>'
            + "".join(f'<sheet name="S{n}" sheetId="{n}" r:id="rId{n}"/>' for n in sheets)
            + "</sheets></workbook>",
        )
        book.writestr(
            "xl/_rels/workbook.xml.rels",
            f'<Relationships xmlns="{RELATIONSHIPS}/package/2006/relationships">'
            + "".join(
                f'<Relationship Id="rId{n}" Type="x" Target="worksheets/sheet{n}.xml"/>'
                for n in sheets
            )
            + "</Relationships>",
        )
        for n in sheets:
            book.writestr(
                f"xl/worksheets/sheet{n}.xml",
                f'<worksheet xmlns="{MAIN}"><sheetData><row r="1"><c t="inlineStr"><is><t>'
                f"notes</t></is></c></row>{' ' * (50 * 1024 * 1024)}</sheetData></worksheet>",
            )
    assert len(out.getvalue()) < 1024 * 1024
    tracemalloc.start()
    try:
        found = problems(out.getvalue())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found == ["1: the workbook unpacks to more than 256 MB"], found
    assert peak < 2 * 50 * 1024 * 1024 + 16 * 1024 * 1024, peak  # a sheet's XML at a time


def test_a_workbook_built_to_hurt_is_refused_not_read() -> None:
    header = (
        '<row r="1"><c r="A1" t="inlineStr"><is><t>question</t></is></c>'
        '<c r="B1" t="inlineStr"><is><t>answer</t></is></c></row>'
    )
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as book:
        book.writestr("xl/workbook.xml", WORKBOOK)
        book.writestr("xl/_rels/workbook.xml.rels", LINKS)
        book.writestr("xl/worksheets/sheet1.xml", b" " * (65 * 1024 * 1024))
    laughs = (
        '<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;">]>'
        '<sst xmlns="x">&b;</sst>'
    )
    strange = bytearray(workbook(header))  # a zip version the standard library lacks
    at = strange.index(b"PK\x01\x02") + 6
    strange[at : at + 2] = (212).to_bytes(2, "little")
    cases = {
        b"PK\x03\x04 not a zip at all": "not an Excel workbook (.xlsx)",
        bytes(strange): "zip file version 21.2",
        b"\xd0\xcf\x11\xe0 an old one": "save it as .xlsx",
        bomb.getvalue(): "unpacks to more than 64 MB",
        workbook(header, parts={"xl/sharedStrings.xml": laughs}): "no DTD",
        workbook(header + '<row r="2"><c r="A2" t="s"><v>9</v></c></row>', ""): "shared string",
        workbook('<row r="1"><c r="XFE1" t="inlineStr"><is><t>q</t></is></c></row>'): "last column",
        workbook("<row><c>"): "is not XML",
        workbook('<row r="1"><c r="A1" t="inlineStr"><is><t>Frage</t></is></c></row>'): (
            "and rejected) in a row of its first 10; the first sheet's first row holds ['Frage']"
        ),
    }
    for content, words in cases.items():
        found = problems(content)
        assert len(found) == 1 and words in found[0], (words, found)
    missing = io.BytesIO()
    with zipfile.ZipFile(missing, "w") as book:
        book.writestr("xl/workbook.xml", WORKBOOK)
    assert "has no xl/_rels/workbook.xml.rels" in problems(missing.getvalue())[0]
    for part, text in (("xl/workbook.xml", "<workbook"), ("xl/_rels/workbook.xml.rels", "<rels")):
        broken = io.BytesIO()  # the parts that find the sheet: a ParseError was a 500
        with zipfile.ZipFile(broken, "w") as book:
            book.writestr("xl/workbook.xml", WORKBOOK if part != "xl/workbook.xml" else text)
            book.writestr(
                "xl/_rels/workbook.xml.rels", LINKS if part == "xl/workbook.xml" else text
            )
        assert f"{part} is not XML" in problems(broken.getvalue())[0]
