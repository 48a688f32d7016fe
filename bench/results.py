"""Each benchmark run's ratios, machine-readable, for `python -m bench.compare OLD NEW`.

A run writes `bench/results/<benchmark>-<UTC time>.json`: the date, the machine, the
commit, and the ratios it measured side by side (qatune over its baseline in the same
run: higher is better). Absolute figures drift with this shared machine; ratios taken in
one run compare across runs.
"""

import json
import os
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class BenchResult:
    benchmark: str
    ratios: dict[str, float]  # name → qatune / baseline, higher is better
    command: str
    date: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    machine: str = field(default_factory=lambda: _machine())
    commit: str = field(default_factory=lambda: _commit())

    @classmethod
    def read(cls, path: Path) -> "BenchResult":
        raw = json.loads(path.read_text())
        return cls(
            benchmark=str(raw["benchmark"]),
            ratios={str(k): float(v) for k, v in raw["ratios"].items()},
            command=str(raw.get("command", "")),
            date=str(raw.get("date", "")),
            machine=str(raw.get("machine", "")),
            commit=str(raw.get("commit", "")),
        )


def record(benchmark: str, ratios: dict[str, float], command: str) -> Path:
    """Write this run's ratios; returns the file."""
    result = BenchResult(benchmark, {k: round(v, 4) for k, v in ratios.items()}, command)
    RESULTS.mkdir(exist_ok=True)
    stamp = result.date.replace(":", "").replace("+0000", "Z")
    path = RESULTS / f"{benchmark}-{stamp}.json"
    path.write_text(json.dumps(asdict(result), indent=2) + "\n")
    return path


def _machine() -> str:
    """The GPU where one ran it, the CPU, its cores, and whether it has native bf16 (it
    changes every ratio)."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    bf16 = "native bf16" if flags & {"avx512_bf16", "amx_bf16"} else "no native bf16"
    cpu = f"{model}, {os.cpu_count()} cores, {bf16 if flags else 'flags unknown'}"
    torch = sys.modules.get("torch")  # a GPU run says so; never import torch just for this
    if torch is not None and torch.cuda.is_available():
        return f"{torch.cuda.get_device_name()}, {cpu}"
    return cpu


def _commit() -> str:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=RESULTS.parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip()
