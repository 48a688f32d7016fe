"""The benchmarks' regression guard: runs' ratios written to a file, and what got slower."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import results
from bench.compare import compare
from bench.results import BenchResult, record

ROOT = Path(__file__).resolve().parents[2]


def test_a_ratio_that_fell_past_the_tolerance_is_a_regression(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    old = record("train_throughput", {"loop": 2.70, "end to end": 1.20, "gone": 1.0}, "bench")
    new_path = tmp_path / "new.json"
    new = json.loads(old.read_text()) | {"ratios": {"loop": 2.65, "end to end": 0.90, "new": 3}}
    new_path.write_text(json.dumps(new))

    lines, slower = compare(BenchResult.read(old), BenchResult.read(new_path), tolerance=0.10)
    assert slower
    text = "\n".join(lines)
    assert "loop: 2.70x → 2.65x (-2%, same)" in text
    assert "end to end: 1.20x → 0.90x (-25%, slower)" in text
    assert "gone: 1.00x → not measured" in text and "new: new, 3.00x" in text

    # From the command line: exit status 1 on a regression, 0 otherwise.
    run = [sys.executable, "-m", "bench.compare", str(old)]
    assert subprocess.run([*run, str(new_path)], cwd=ROOT).returncode == 1
    assert subprocess.run([*run, str(old)], cwd=ROOT, capture_output=True).returncode == 0
