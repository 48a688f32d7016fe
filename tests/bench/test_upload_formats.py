"""bench/upload_formats.py: every format it times holds the same pairs, so the times are of
the same work."""

from app.services.datasets.qa_parsing import parse_qa_bytes
from bench.upload_formats import files, table


def test_each_format_holds_the_same_pairs() -> None:
    made = files(table(30))
    parsed = {
        name: parse_qa_bytes(content, filename=filename)
        for name, (filename, content) in made.items()
    }
    assert {parsed[name].format for name in made} == {"jsonl", "csv", "xlsx"}
    baseline = parsed["JSONL"].pairs
    assert len(baseline) == 60
    assert all(result.pairs == baseline for result in parsed.values())
