"""What got slower between two benchmark runs: `python -m bench.compare OLD.json NEW.json`.

Compares the ratios two runs of one benchmark recorded (bench/results.py). A ratio that
fell by more than the tolerance (default 10%: this shared machine's run-to-run noise on
ratios) is a regression; the exit status is 1 if there is any, so a script can act on it.
"""

import argparse
import sys
from pathlib import Path

from bench.results import BenchResult


def compare(old: BenchResult, new: BenchResult, tolerance: float) -> tuple[list[str], bool]:
    lines = [
        f"{new.benchmark}: {old.date} ({old.commit or '?'}) → {new.date} ({new.commit or '?'})",
    ]
    if old.machine != new.machine:
        lines.append(f"  machines differ: {old.machine!r} vs {new.machine!r}")
    slower = False
    for name in sorted(old.ratios.keys() | new.ratios.keys()):
        if name not in new.ratios:
            lines.append(f"  {name}: {old.ratios[name]:.2f}x → not measured")
            continue
        if name not in old.ratios:
            lines.append(f"  {name}: new, {new.ratios[name]:.2f}x")
            continue
        before, after = old.ratios[name], new.ratios[name]
        change = after / before - 1
        verdict = "slower" if change < -tolerance else "faster" if change > tolerance else "same"
        slower |= verdict == "slower"
        lines.append(f"  {name}: {before:.2f}x → {after:.2f}x ({change:+.0%}, {verdict})")
    return lines, slower


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--tolerance", type=float, default=0.10)
    args = parser.parse_args()
    old, new = BenchResult.read(args.old), BenchResult.read(args.new)
    if old.benchmark != new.benchmark:
        raise SystemExit(f"{args.old} is {old.benchmark}, {args.new} is {new.benchmark}")
    lines, slower = compare(old, new, args.tolerance)
    print("\n".join(lines))
    sys.exit(1 if slower else 0)


if __name__ == "__main__":
    main()
