"""A training child's fork server loading its imports with the collector paused, side by
side with it running.

    python -m bench.startup --rounds 8

The fork server (app/worker/local.py) imports app/worker/preload.py once per service, at
its first job; each import is a fresh Python process here. The baseline is the same import
with `gc.disable` made a no-op first (the collector runs while everything loads; what is
loaded is still frozen after). The two alternate, each first in every other round (the
second of a pair measured ~5% dearer). Reported: the CPU seconds of each (user + system),
medians, and the ratio baseline / paused (higher is better).
"""

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from bench.results import record

ROOT = Path(__file__).resolve().parent.parent
COLLECTOR_KEPT = "import gc; gc.disable = lambda: None\n"
FORK_SERVER = "import app.worker.preload\n"


def import_cpu_seconds(prefix: str) -> float:
    """The fork server's imports in a fresh process: its CPU seconds, user and system."""
    before = os.times()
    subprocess.run([sys.executable, "-c", prefix + FORK_SERVER], cwd=ROOT, check=True)
    after = os.times()
    user = after.children_user - before.children_user
    return user + after.children_system - before.children_system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    kept: list[float] = []
    paused: list[float] = []
    for round_ in range(args.rounds):  # ABBA: whichever runs second pays more
        if round_ % 2:
            paused.append(import_cpu_seconds(""))
        kept.append(import_cpu_seconds(COLLECTOR_KEPT))
        if not round_ % 2:
            paused.append(import_cpu_seconds(""))
    ratio = statistics.median(kept) / statistics.median(paused)
    print(f"fork server imports, CPU s: collector kept {' '.join(f'{s:.2f}' for s in kept)}")
    print(f"                            paused         {' '.join(f'{s:.2f}' for s in paused)}")
    print(
        f"medians: kept {statistics.median(kept):.2f} s, paused {statistics.median(paused):.2f} s:"
        f" {ratio:.2f}x"
    )
    command = f"python -m bench.startup --rounds {args.rounds}"
    print(
        "recorded", record("startup", {"fork server imports cpu": ratio}, command).relative_to(ROOT)
    )


if __name__ == "__main__":
    main()
