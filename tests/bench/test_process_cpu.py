"""bench.process_cpu counts the CPU of what a command starts, by kind."""

import re
import subprocess
import sys

from tests.conftest import ROOT

SPIN = "import time\nend = time.process_time() + 1.5\nwhile time.process_time() < end: pass\n"


def test_a_busy_child_is_counted_and_the_status_passed_on() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.process_cpu", "--every", "0.2", "--",
         "bash", "-c", f"{sys.executable} -c '{SPIN}'; exit 3"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    total = re.search(r"([\d,.]+) core-seconds in (\d+) processes", done.stdout)
    assert total, done.stdout
    assert 1.2 <= float(total[1].replace(",", "")) < 5, done.stdout
