"""When a queued job says it starts, against when it starts; and a job's estimated run
against its run.

    python -m bench.queue_starts [--model builtin:tiny | smollm2-135m-instruct] [--jobs 3]

One real service (`qatune serve`, SQLite, its own worker, one slot). A first job runs
alone, so that what follows is estimated from a job on the same model and device (its
speed, and the time it spent outside its training loop: loading, measuring, saving). Then
`--jobs` jobs are asked for at once, each on its own FAQ of bench/faq_data.py (or, on the
real model, of bench/data); at that moment each queued job's `starts_in_seconds` is read,
and later set beside when it started (its `started_at`), and each job's
`estimated_run_seconds` beside its run (`finished_at` - `started_at`). Ratios: the shorter over
the longer (1.0: exact, 0.5: 2x off either way); the start of the job next to run is
always 0 and not counted.
"""

import argparse
import json
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.faq_data import faq
from bench.real_model import DATA, REAL, real_model_dir
from bench.results import record
from tests.conftest import Server, free_port, login_over_http, service_env, wait_for_status


def closeness(estimated: float, measured: float) -> float:
    return min(estimated, measured) / max(estimated, measured) if max(estimated, measured) else 1


def faqs(model: str, count: int) -> list[list[dict[str, str]]]:
    """A FAQ for each job: written ones on the real model (a random model learns anything)."""
    if model != REAL:
        return [faq(30, "medium", "en", seed=seed) for seed in range(count)]
    names = ["staff", "product", "library", "clinic"]
    sets = []
    for index in range(count):
        pairs = json.loads((DATA / f"{names[index % len(names)]}_faq.json").read_text())["pairs"]
        sets.append([{"question": p["question"], "answer": p["answer"]} for p in pairs])
    return sets


def moment(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="builtin:tiny", choices=["builtin:tiny", REAL])
    parser.add_argument("--jobs", type=int, default=3)
    args = parser.parse_args()
    sets = faqs(args.model, args.jobs + 1)
    ratios: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="qatune-queue-") as tmp:
        data_dir = Path(tmp) / "data"
        (data_dir / "models").mkdir(parents=True)
        if args.model == REAL:
            kept = real_model_dir()
            (data_dir / "models" / kept.name).symlink_to(kept)
        env = service_env(data_dir, QATUNE_DEFAULT_BASE_MODEL=args.model)
        server = Server(f"http://127.0.0.1:{free_port()}", data_dir, env)
        server.start()
        try:
            api = server.client(login_over_http(server))
            first = api.post("/jobs", json={"qa_pairs": sets[0]}).json()
            alone = wait_for_status(api, first["id"], {"succeeded"}, timeout=3600)
            asked = [api.post("/jobs", json={"qa_pairs": pairs}).json() for pairs in sets[1:]]
            at = time.time()
            said = {job["id"]: job for job in api.get("/jobs").json()["items"]}
            done = [wait_for_status(api, job["id"], {"succeeded"}, 3600) for job in asked]
        finally:
            server.stop()
    print(
        "| job | place | said it starts in | started after | off by | estimated run | run "
        "| off by |\n|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    alone_run = moment(alone["finished_at"]) - moment(alone["started_at"])
    ratios["run_alone"] = closeness(alone["estimated_run_seconds"], alone_run)
    print(  # estimated from this machine's speed: no job's time outside its loop known yet
        f"| {alone['id']} | alone, first | — | — | — | {alone['estimated_run_seconds']:.0f} s "
        f"| {alone_run:.0f} s | {1 / ratios['run_alone']:.2f}x |"
    )
    for place, job in enumerate(done):
        told: Any = said[job["id"]]["starts_in_seconds"]
        started = moment(job["started_at"]) - at
        run = moment(job["finished_at"]) - moment(job["started_at"])
        estimated = job["estimated_run_seconds"]
        ratios[f"run_{place}"] = closeness(estimated, run)
        start_cell = "—"
        if place:  # the next to run starts at once, whatever was said
            ratios[f"start_{place}"] = closeness(told, started)
            start_cell = f"{1 / ratios[f'start_{place}']:.2f}x"
        print(
            f"| {job['id']} | {place} | {told:.0f} s | {started:.0f} s | {start_cell} "
            f"| {estimated:.0f} s | {run:.0f} s | {1 / ratios[f'run_{place}']:.2f}x |"
        )
    command = f"python -m bench.queue_starts --model {args.model} --jobs {args.jobs}"
    print(f"\nwritten to {record('queue_starts', ratios, command)}")


if __name__ == "__main__":
    main()
