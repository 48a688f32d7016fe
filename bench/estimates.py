"""A job's time estimate against the job it describes, on an idle CPU and beside a busy one.

    python -m bench.estimates [--pairs 30]

One real service per condition (`qatune serve`, SQLite, `builtin:tiny`, its own worker),
fresh, so that its first estimate has no earlier job to go by:

1. `POST /jobs/estimate` for a FAQ (bench/faq_data.py), then the same job created and run;
   the training loop's time it reports (`train_runtime_s`) against `estimated_seconds`
   (`estimated_from`: matrix_speed, this machine's probe);
2. the same for a second FAQ of the same size, now estimated from the first job's speed
   (`last_job`).

"Busy": a Python loop spinning on one core at niceness 0 (another program on the machine)
from before the first estimate to the end; the training child runs at its niceness (10).
Beside each first estimate, in this process at the same moment, what the probe used to
measure (every core, whatever else ran): the old estimate is the service's scaled by the
two probes' ratio. Ratios: the shorter of estimate and measured over the longer (1.0: exact,
0.5: 2x off either way), per condition and source, and the old probe's.
"""

import argparse
import statistics
import tempfile
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import psutil

from app.ml import speed
from bench.contention import busy_core
from bench.faq_data import faq
from bench.results import record
from tests.conftest import Server, login_over_http, start_server, wait_for_status


def closeness(estimated: float, measured: float) -> float:
    return min(estimated, measured) / max(estimated, measured)


def old_probe_over_new() -> float:
    """GFLOP/s as the probe measures them now (the cores left free) over the old probe's
    (every core): how much longer the old one would have said a job takes."""
    physical = psutil.cpu_count(logical=False) or psutil.cpu_count() or 1
    speed._measured.clear()
    now = speed.cpu_gflops(physical)
    before = statistics.median(speed._probe(physical) for _ in range(speed.PROBES))
    return now / before


def one_job(server: Server, headers: dict[str, str], pairs: list[dict[str, str]]) -> dict[str, Any]:
    with server.client(headers) as api:
        body = {"qa_pairs": pairs}
        estimate = api.post("/jobs/estimate", json=body)
        estimate.raise_for_status()
        job = api.post("/jobs", json=body)
        job.raise_for_status()
        done = wait_for_status(api, job.json()["id"], {"succeeded", "failed"}, timeout=1800)
    assert done["status"] == "succeeded", done.get("error")
    return {
        "estimated": estimate.json()["estimated_seconds"],
        "source": estimate.json()["estimated_from"],
        "measured": done["metrics"]["train_runtime_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=30)
    args = parser.parse_args()
    from app.ml.builtin import ensure_builtin_model

    ratios: dict[str, float] = {}
    print(
        "| CPU | estimated from | estimated | measured | off by | the old probe's estimate |\n"
        "|---|---|---:|---:|---:|---:|"
    )
    with tempfile.TemporaryDirectory() as tmp:
        model_cache = Path(tmp) / "models"
        ensure_builtin_model(model_cache)
        for condition in ("idle", "busy"):
            with busy_core() if condition == "busy" else nullcontext():
                server = start_server(Path(tmp) / condition, model_cache)
                try:
                    headers = login_over_http(server)
                    old_factor = old_probe_over_new()
                    for seed in (0, 1):
                        pairs = faq(args.pairs, "medium", "en", seed=seed)
                        found = one_job(server, headers, pairs)
                        estimated, measured = found["estimated"], found["measured"]
                        ratios[f"{condition}_{found['source']}"] = closeness(estimated, measured)
                        old = "—"
                        if seed == 0:
                            old_estimate = estimated * old_factor
                            ratios[f"{condition}_old_probe"] = closeness(old_estimate, measured)
                            old_off = 1 / ratios[f"{condition}_old_probe"]
                            old = f"{old_estimate:.1f} s ({old_off:.2f}x)"
                        off = max(estimated, measured) / min(estimated, measured)
                        print(
                            f"| {condition} | {found['source']} | {estimated:.1f} s | "
                            f"{measured:.1f} s | {off:.2f}x | {old} |"
                        )
                finally:
                    server.stop()
    command = f"python -m bench.estimates --pairs {args.pairs}"
    print(f"\nwritten to {record('estimates', ratios, command)}")


if __name__ == "__main__":
    main()
