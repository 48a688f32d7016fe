"""A number in a workbook cell as the user sees it, not as Excel stores it.

Excel stores a date as days since 1900 (46015 is 2025-12-24), a time as a fraction of a day,
15% as 0.15, and 0.1 + 0.2 as 0.30000000000000004; the cell's number format, named by its
style, says how it is shown. Dates and times are written in ISO form (2025-12-24, 09:30),
which reads the same in every language. Other numbers are written by their format's one
run of digit placeholders (decimals, thousands separators, leading zeros, a percentage)
and the text around it (a currency sign, a unit), in the format's own section for a
negative number or zero; a format beyond that (fractions, exponents, two runs of digits)
and General show at most 15 significant digits, as Excel's General does.
"""

import math
import re
from datetime import datetime, timedelta

# The built-in formats by id (ECMA-376 18.8.30), as a code that shows the same here (a
# date's "d": in ISO form); the ids not listed here (General, the currencies of the reader's
# locale) show a number with at most 15 significant digits.
BUILTIN = {
    1: "0",
    2: "0.00",
    3: "#,##0",
    4: "#,##0.00",
    9: "0%",
    10: "0.00%",
    **dict.fromkeys((14, 15, 16, 17, 27, 28, 29, 30, 31, 36, 50, 51, 52, 53, 54, 57, 58), "d"),
    **dict.fromkeys((18, 20, 32, 33, 55), "h:mm"),
    **dict.fromkeys((19, 21, 34, 35, 56), "h:mm:ss"),
    22: "d h:mm",
    37: "#,##0 ;(#,##0)",
    38: "#,##0 ;(#,##0)",
    39: "#,##0.00;(#,##0.00)",
    40: "#,##0.00;(#,##0.00)",
    45: "mm:ss",
    46: "[h]:mm:ss",
    47: "mm:ss",
}
# What a format shows literally: quoted text, an escaped or padded character, a colour or
# locale in brackets (but not [h], [mm] or [ss], elapsed time).
LITERAL = re.compile(r'"[^"]*"|\\.|_.|\*.|\[(?![hms]+\])[^\]]*\]', re.IGNORECASE)
# One piece of a format section: text shown as it is (quoted, escaped, a currency's
# [$€-407]), the run of digit placeholders, what shows nothing here (a padding _x, a fill
# *x, a colour or condition in brackets), or a character of its own ($, -, %, a space).
PIECE = re.compile(
    r'"(?P<quoted>[^"]*)"|\\(?P<escaped>.)|[_*].|\[\$(?P<currency>[^\]-]*)[^\]]*\]|\[[^\]]*\]'
    r"|(?P<digits>[0#?][0#?,.]*)|(?P<other>.)",
    re.DOTALL,
)
EXCEL_1900 = datetime(1899, 12, 30)  # day 0, counting Excel's leap day of 1900 from day 61
EXCEL_1904 = datetime(1904, 1, 1)
LAST_DAY = 2_958_465  # 9999-12-31


def shown(value: str, code: str, *, date1904: bool) -> str:
    """The stored number `value` as format `code` shows it; what is no finite number (an
    error such as #N/A) as it is stored."""
    try:
        number = float(value)
    except ValueError:
        return value
    if not math.isfinite(number):
        return value
    letters = LITERAL.sub("", _sections(code)[0]).lower()
    if re.search(r"[dmyhs]", letters) and 0 <= number <= LAST_DAY:
        return _when(number, letters, date1904=date1904)
    if (text := _formatted(number, code)) is not None:
        return text
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))  # 42, not 42.0
    general = format(number, ".15g")
    return value if "e" in general else general


def _formatted(number: float, code: str) -> str | None:
    """The number as a format of one run of digit placeholders shows it; None for General
    and anything else (a code longer than Excel's 255 characters: a crafted one would write
    thousands of zeros a cell)."""
    if len(code) > 255:
        return None
    sections = _sections(code)
    section, sign = sections[0], "-" if number < 0 else ""
    if number < 0 and len(sections) > 1:
        section, sign = sections[1], ""  # its own way of showing a negative: (5.00)
    elif number == 0 and len(sections) > 2:
        section = sections[2]
    if section.strip().lower() in ("", "general"):
        return None
    shown: list[str | None] = []
    digits = None
    percent = False
    for piece in PIECE.finditer(section):
        if piece["digits"] is not None:
            if digits is not None:
                return None  # 0.00E+00, # ?/?, 000-0000: not read here
            digits = piece["digits"]
            shown.append(None)
        elif piece["other"] is not None:
            if piece["other"] == "@":
                return None  # a text format
            percent = percent or piece["other"] == "%"
            shown.append(piece["other"])
        else:
            shown.append(piece["quoted"] or piece["escaped"] or piece["currency"] or "")
    if digits is None:  # text alone, as a zero's "none"
        return "".join(part or "" for part in shown).strip() or None
    number = abs(number) * (100 if percent else 1)
    whole, _, fraction = digits.partition(".")
    places = sum(c in "0#?" for c in fraction)
    text = f"{number:{',' if ',' in whole.strip(',') else ''}.{places}f}"
    optional = len(fraction) - len(fraction.rstrip("#?"))  # "0.0#": 1.5, not 1.50
    while optional and text.endswith("0") and "." in text:
        text, optional = text[:-1], optional - 1
    text = text.removesuffix(".")
    integer = text.split(".")[0]
    text = "0" * (whole.count("0") - len(integer)) + text  # 00000: 00501, as a ZIP code
    return (sign + "".join(text if part is None else part for part in shown)).strip()


def _sections(code: str) -> list[str]:
    """A format's sections (positive;negative;zero;text), split at the ; outside quotes."""
    sections, current, quoted, escaped = [], "", False, False
    for char in code:
        if escaped:
            escaped = False
        elif char == "\\" and not quoted:
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == ";" and not quoted:
            sections.append(current)
            current = ""
            continue
        current += char
    return [*sections, current]


def _when(serial: float, letters: str, *, date1904: bool) -> str:
    has_time = re.search(r"[hs]", letters) is not None
    has_date = re.search(r"[dy]", letters) is not None or not has_time  # "mmmm": a month
    days, seconds = divmod(round(serial * 86_400), 86_400)
    clock = seconds if "[" not in letters else days * 86_400 + seconds  # [h]: past 24 hours
    hours, minutes = divmod(clock // 60, 60)
    time = f"{hours:02d}:{minutes:02d}"
    if "s" in letters:
        time += f":{clock % 60:02d}"
    if not has_date:
        return time
    if not date1904 and days < 61:
        days += 1  # before Excel's 29 February 1900, which never was
    day = ((EXCEL_1904 if date1904 else EXCEL_1900) + timedelta(days=days)).date().isoformat()
    return f"{day} {time}" if has_time else day
