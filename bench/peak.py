"""A command's own peak RSS, as Linux counts it for that process alone.

`wait4`'s ru_maxrss for a child that `subprocess` started is not the child's own: Python
starts children with vfork, and exec then records the parent's high-water mark as the
child's. Measured: a child that runs `pass` reports 3.2 GB once its parent has held 3 GB,
even after the parent freed it. A benchmark that made a model in its own process would
read that model's size as every child's peak. So the command runs under this small
process, which starts it and reads its rusage: the high-water mark it passes on is its own
(~10 MB, no torch).

    python -m bench.peak OUT -- COMMAND...   (OUT: the file the peak in KiB is written to)
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def run_measured(
    command: list[str], *, cwd: Path, env: dict[str, str], stdout: Any, stderr: Any
) -> tuple[int, float, float]:
    """Run `command`: (its exit status, its wall seconds, its own peak RSS in GiB)."""
    with tempfile.TemporaryDirectory(prefix="qatune-peak-") as directory:
        out = Path(directory) / "peak"
        started = time.perf_counter()
        status = subprocess.run(
            [sys.executable, "-m", "bench.peak", str(out), "--", *command],
            cwd=cwd,
            env=env,
            stdout=stdout,
            stderr=stderr,
            check=False,
        ).returncode
        wall = time.perf_counter() - started
        peak_kib = int(out.read_text()) if out.exists() else 0
    return status, wall, peak_kib / 1024**2


def main() -> None:
    out, separator, *command = sys.argv[1:]
    if separator != "--" or not command:
        raise SystemExit(__doc__)
    process = subprocess.Popen(command)
    _, status, usage = os.wait4(process.pid, 0)
    Path(out).write_text(str(usage.ru_maxrss))  # KiB on Linux
    raise SystemExit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
