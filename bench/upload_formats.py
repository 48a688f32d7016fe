"""What reading an uploaded dataset costs in each format it comes in, beside the JSONL
that qatune stores.

    python -m bench.upload_formats --rows 25000 --rounds 3

One table of `--rows` questions (each with an answer and a rewording, so two pairs a row)
is written as JSONL (the baseline: the format a dataset is stored in), as CSV with commas,
with semicolons, as Excel's "Unicode Text" (UTF-16, tabs) and as an Excel workbook
(openpyxl, as a spreadsheet program saves one). Each is parsed whole by
`parse_qa_bytes`, in one process, the formats taking turns; the median of `--rounds`
seconds, its ratio to JSONL's, and the peak of Python's allocations while parsing.
"""

import argparse
import csv
import io
import json
import statistics
import time
import tracemalloc

import openpyxl

from app.services.datasets.qa_parsing import parse_qa_bytes

HEADER = ["question", "answer", "rewording 1"]


def table(rows: int) -> list[list[str]]:
    return [
        [
            f"What is the access code for room {n}?",
            f"The code for room {n} is {n * 7919 % 100_000:05d}.",
            f"Which code opens room {n}?",
        ]
        for n in range(rows)
    ]


def files(rows: list[list[str]]) -> dict[str, tuple[str, bytes]]:
    """Each format's file name and bytes, all holding `rows`."""
    records = [{"question": q, "answer": a, "rewordings": [r]} for q, a, r in rows]
    jsonl = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)

    def delimited(delimiter: str) -> str:
        out = io.StringIO()
        csv.writer(out, delimiter=delimiter).writerows([HEADER, *rows])
        return out.getvalue()

    book = openpyxl.Workbook(write_only=True)
    sheet = book.create_sheet()
    for row in [HEADER, *rows]:
        sheet.append(row)
    workbook = io.BytesIO()
    book.save(workbook)
    return {
        "JSONL": ("faq.jsonl", jsonl.encode()),
        "CSV, commas": ("faq.csv", delimited(",").encode()),
        "CSV, semicolons": ("faq.csv", delimited(";").encode()),
        "UTF-16, tabs": ("faq.txt", delimited("\t").encode("utf-16")),
        "Excel workbook": ("faq.xlsx", workbook.getvalue()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=25_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    made = files(table(args.rows))
    seconds: dict[str, list[float]] = {name: [] for name in made}
    for _ in range(args.rounds):  # the formats take turns, so a slow moment hits all
        for name, (filename, content) in made.items():
            started = time.perf_counter()
            parsed = parse_qa_bytes(content, filename=filename)
            seconds[name].append(time.perf_counter() - started)
            assert len(parsed.pairs) == 2 * args.rows, name
    baseline = statistics.median(seconds["JSONL"])
    print("format             MB   pairs    s (x JSONL)   peak MiB")
    for name, (filename, content) in made.items():
        tracemalloc.start()
        parse_qa_bytes(content, filename=filename)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        median = statistics.median(seconds[name])
        print(
            f"{name:16} {len(content) / 1e6:5.1f} {2 * args.rows:7d} "
            f"{median:6.3f} ({median / baseline:4.2f}x) {peak:9.1f}"
        )


if __name__ == "__main__":
    main()
