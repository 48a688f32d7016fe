"""Serving beside other work on the same CPU: the service's engine with torch's threads
fixed at every core (what it did before) and with qatune's sharing (app/ml/cpu_share.py),
alone and beside one busy core (a training job, another program).

    python -m bench.serve_contention [--tokens 64] [--rounds 3]

The built-in model through the service's own QueryService: 8 requests at once (greedy,
`ignore_eos`, exactly N new tokens each), the aggregate tokens/s, best of `--rounds`. The
busy core is a plain Python loop in a process of its own. Run it with nothing else busy.
"""

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from app.ml.builtin import BUILTIN_TINY, ensure_builtin_model
from app.ml.data import prompt_ids
from app.ml.device import plan_device, probe_capabilities
from app.ml.query_service import QueryService
from bench.results import record
from bench.serve_throughput import QUESTION, engine_run

CORES = psutil.cpu_count(logical=False) or 1


@contextmanager
def busy_core(on: bool) -> Iterator[None]:
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if on else None
    try:
        time.sleep(1.5 if on else 0)  # a sample's worth: the sharing engine has seen it
        yield
    finally:
        if spin:
            spin.kill()
            spin.wait()


class FixedThreads(QueryService):
    """The engine as it was: every core's thread, whatever else runs."""

    def _cpu_threads(self) -> None:
        return None


def tokens_per_second(service: QueryService, tokens: int, rounds: int, busy: bool) -> float:
    engine = service.builtin_engine(BUILTIN_TINY)
    prompt = prompt_ids(engine.tokenizer, [{"role": "user", "content": QUESTION}])
    with busy_core(busy):
        engine_run(engine, prompt, [None] * 8, tokens)  # warm: the first second's sample
        best = min(engine_run(engine, prompt, [None] * 8, tokens)[0] for _ in range(rounds))
    return 8 * tokens / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    plan = plan_device(probe_capabilities(), "cpu")
    cache = Path(tempfile.mkdtemp(prefix="qatune-bench-"))
    ensure_builtin_model(cache)
    results: dict[str, dict[str, float]] = {}
    policies = {f"{CORES} threads, fixed (before)": FixedThreads, "shared": QueryService}
    for name, kind in policies.items():
        service = kind(device_plan=plan, model_cache_dir=cache, offline=True)
        results[name] = {
            "alone": tokens_per_second(service, args.tokens, args.rounds, busy=False),
            "beside a busy core": tokens_per_second(service, args.tokens, args.rounds, busy=True),
        }
        service.drop_cached()
    print(f"\n### 8 requests at once, {args.tokens} new tokens each ({plan.precision})\n")
    print("| engine threads | alone tok/s | beside a busy core tok/s | kept |")
    print("|---|---:|---:|---:|")
    for name, figures in results.items():
        alone, busy = figures["alone"], figures["beside a busy core"]
        print(f"| {name} | {alone:,.0f} | {busy:,.0f} | {busy / alone:.0%} |")
    fixed, shared = results.values()
    ratio = shared["beside a busy core"] / fixed["beside a busy core"]
    print(f"\nbeside a busy core, shared / fixed: {ratio:.2f}x")
    record(
        "serve_contention",
        {"beside a busy core: shared / fixed": ratio},
        f"python -m bench.serve_contention --tokens {args.tokens} --rounds {args.rounds}",
    )


if __name__ == "__main__":
    main()
