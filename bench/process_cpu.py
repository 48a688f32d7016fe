"""Where a command's CPU goes, by kind of process: every process's user and system time,
sampled while the command runs, summed by what the process is.

    python -m bench.process_cpu -- bash .ci/run

Each process is read every `--every` seconds (psutil); one that lives less than that may be
missed, and a process's last reading is its total. Kinds come from command lines: API
servers, training fork servers and the children they fork, pytest workers, the command
line, browsers, Ray, the fuzzer, GGUF conversions; the rest by name.
"""

import argparse
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass

import psutil

KINDS = (  # the first whose pattern is in the command line names the kind
    ("app.cli serve", "API server"),
    ("app.ml.export.llama_cpp", "GGUF conversion"),
    ("app.cli", "command line"),
    ("schemathesis", "schemathesis"),
    ("exec(eval(sys.stdin.readline()))", "pytest worker"),
    ("pytest", "pytest"),
    ("chrom", "chromium"),
    ("ray", "Ray"),
    ("postgres", "PostgreSQL"),
    ("app.graders.sandbox.child", "grader sandbox"),
)


@dataclass
class Seen:
    parent: int
    created: float
    command: str
    name: str
    cpu: float = 0.0


Key = tuple[int, float]  # pid and start time: pids are reused in a long run


def kind(process: Seen, seen: dict[Key, Seen]) -> str:
    if "forkserver" in process.command:
        parents = [p for (pid, _), p in seen.items() if pid == process.parent]
        forked = any("forkserver" in p.command for p in parents if p.created <= process.created)
        return "training child (forked)" if forked else "fork server"
    return next((k for pattern, k in KINDS if pattern in process.command), process.name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=2.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = [c for c in args.command if c != "--"] or ["true"]
    started = time.time()
    seen: dict[Key, Seen] = {}
    ours = {psutil.Process().pid}
    child = subprocess.Popen(command)
    while True:
        for process in psutil.process_iter(["pid", "ppid", "cmdline", "name", "create_time"]):
            info = process.info
            if info["create_time"] < started - 1 or info["pid"] in ours:
                continue  # what ran before the command, and this sampler
            try:
                times = process.cpu_times()
            except psutil.Error:
                continue
            key = (info["pid"], info["create_time"])
            entry = seen.setdefault(
                key, Seen(info["ppid"], info["create_time"], "", info["name"] or "")
            )
            entry.command = " ".join(info["cmdline"] or []) or entry.command  # kept at exit
            entry.cpu = max(entry.cpu, times.user + times.system)
        if child.poll() is not None:
            break
        time.sleep(args.every)
    total: defaultdict[str, float] = defaultdict(float)
    count: Counter[str] = Counter()
    for process in seen.values():
        total[kind(process, seen)] += process.cpu
        count[kind(process, seen)] += 1
    print(f"\n{sum(total.values()):,.1f} core-seconds in {len(seen)} processes, "
          f"{time.time() - started:,.0f} s of wall time")  # fmt: skip
    for name, cpu in sorted(total.items(), key=lambda item: -item[1])[:20]:
        print(f"{cpu:9.1f}  {count[name]:4}  {name}")
    sys.exit(child.returncode)


if __name__ == "__main__":
    main()
