"""A number in a workbook cell as the user sees it, not as Excel stores it.

Excel stores a date as days since 1900 (46015 is 2025-12-24), a time as a fraction of a day,
15% as 0.15, and 0.1 + 0.2 as 0.30000000000000004; the cell's number format, named by its
style, says how it is shown. Dates and times are written in ISO form (2025-12-24, 09:30),
which reads the same in every language; percentages with the format's decimals; other
numbers with at most 15 significant digits, as Excel shows them.
"""

import math
import re
from datetime import datetime, timedelta

# The built-in formats that are dates, times or percentages, by id (ECMA-376 18.8.30), as
# a format code that says the same; the ids not listed here show a number as a number.
BUILTIN = {
    9: "0%",
    10: "0.00%",
    **dict.fromkeys((14, 15, 16, 17, 27, 28, 29, 30, 31, 36, 50, 51, 52, 53, 54, 57, 58), "d"),
    **dict.fromkeys((18, 20, 32, 33, 55), "h:mm"),
    **dict.fromkeys((19, 21, 34, 35, 56), "h:mm:ss"),
    22: "d h:mm",
    45: "mm:ss",
    46: "[h]:mm:ss",
    47: "mm:ss",
}
# What a format shows literally: quoted text, an escaped or padded character, a colour or
# locale in brackets (but not [h], [mm] or [ss], elapsed time).
LITERAL = re.compile(r'"[^"]*"|\\.|_.|\*.|\[(?![hms]+\])[^\]]*\]', re.IGNORECASE)
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
    letters = LITERAL.sub("", code.split(";")[0]).lower()
    if re.search(r"[dmyhs]", letters) and 0 <= number <= LAST_DAY:
        return _when(number, letters, date1904=date1904)
    if "%" in letters:
        decimals = len(re.search(r"\.(0*)", letters + ".")[1])  # type: ignore[index]
        return f"{number * 100:.{decimals}f}%"
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))  # 42, not 42.0
    general = format(number, ".15g")
    return value if "e" in general else general


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
