"""Training beside other work on the same CPU: alone, beside a busy core, beside a second
training run, and while the service answers playground questions.

    python -m bench.contention [--window 20]

Everything runs through real services (`qatune serve`, its worker child at niceness 10),
once with torch's threads fixed at every core (what qatune did before) and once with
qatune's sharing (app/ml/cpu_share.py). A job trains on tests/data/qa30.jsonl;
its tokens/s is the trainer's own figure `--window` seconds into training (the job is then
cancelled), so a collapsed run costs no more time than a healthy one. Meanwhile a client
times `GET /jobs` every 100 ms. Run it with nothing else busy.
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

from tests.conftest import Server, login_over_http, qa_pairs, start_server

CORES = psutil.cpu_count(logical=False) or 1
POLICIES = {
    f"{CORES} threads, fixed (before)": {"QATUNE_TRAINING_THREADS": str(CORES)},
    "shared (qatune)": {},
}
QUESTIONS = [pair["question"] for pair in qa_pairs()]


@dataclass
class Latencies:
    seconds: list[float] = field(default_factory=list)

    def p(self, q: float) -> float:
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0


@dataclass
class Run:
    server: Server
    api: httpx.Client
    job_id: int = 0
    tokens_per_second: float = 0.0


def start_job(run: Run) -> None:
    job = run.api.post(
        "/jobs",
        # 120 pairs x 100 epochs: far longer than any window
        json={"qa_pairs": qa_pairs() * 4, "hyperparameters": {"epochs": 100, "seed": 1}},
    )
    job.raise_for_status()
    run.job_id = job.json()["id"]


def training_speed(run: Run, window: float) -> None:
    """The trainer's tokens/s `window` seconds after its first step; then cancel the job."""
    after, first_step_at, speed = 0, None, 0.0
    while first_step_at is None or time.monotonic() - first_step_at < window:
        page = run.api.get(f"/jobs/{run.job_id}/logs", params={"after": after}).json()
        after = page["next_after"]
        for event in page["events"]:
            if event["data"].get("kind") == "progress":
                speed = event["data"]["tokens_per_second"]
                first_step_at = first_step_at or time.monotonic()
        if page["status"] not in ("queued", "running"):
            raise RuntimeError(f"job {run.job_id} ended early: {page['status']}")
        time.sleep(0.25)
    run.tokens_per_second = speed
    run.api.post(f"/jobs/{run.job_id}/cancel").raise_for_status()
    while run.api.get(f"/jobs/{run.job_id}").json()["status"] != "cancelled":
        time.sleep(0.25)


@contextmanager
def in_background(work: Callable[[threading.Event], None]) -> Iterator[None]:
    stop = threading.Event()
    thread = threading.Thread(target=work, args=(stop,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextmanager
def busy_core() -> Iterator[None]:
    """A CPU-bound program at the user's niceness: a build, a test suite, a video call."""
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spin.kill()
        spin.wait()


def poll_jobs(api: httpx.Client, latencies: Latencies) -> Callable[[threading.Event], None]:
    def work(stop: threading.Event) -> None:
        while not stop.wait(0.1):
            started = time.perf_counter()
            api.get("/jobs").raise_for_status()
            latencies.seconds.append(time.perf_counter() - started)

    return work


def ask_questions(api: httpx.Client, answered: Latencies) -> Callable[[threading.Event], None]:
    """A user at the playground: a question, read the answer for a second, the next one."""

    def work(stop: threading.Event) -> None:
        for question in QUESTIONS * 100:
            started = time.perf_counter()
            response = api.post(
                "/v1/chat/completions",
                json={
                    "model": "builtin:tiny",
                    "messages": [{"role": "user", "content": question}],
                    "max_tokens": 48,
                },
            )
            response.raise_for_status()
            answered.seconds.append(time.perf_counter() - started)
            if stop.wait(1.0):
                return

    return work


def measure(
    policy: str, scenario: str, runs: list[Run], window: float, *, questions: bool = False
) -> dict[str, str]:
    latencies, answered = Latencies(), Latencies()
    first = runs[0]
    for run in runs:
        start_job(run)
    threads = [threading.Thread(target=training_speed, args=(run, window)) for run in runs]
    with in_background(poll_jobs(first.api, latencies)):
        with in_background(ask_questions(first.api, answered)) if questions else _nothing():
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    speeds = [run.tokens_per_second for run in runs]
    row = {
        "policy": policy,
        "scenario": scenario,
        "tok/s": " + ".join(f"{s:,.0f}" for s in speeds),
        "GET /jobs p50 / p99 ms": f"{latencies.p(0.5):.0f} / {latencies.p(0.99):.0f}",
        "answers": f"{len(answered.seconds)}, median {statistics.median(answered.seconds):.2f} s"
        if answered.seconds
        else "",
        "_speed": str(statistics.mean(speeds)),
    }
    print(row, flush=True)
    return row


@contextmanager
def _nothing() -> Iterator[None]:
    yield


@contextmanager
def services(scratch: Path, model_cache: Path, env: dict[str, str]) -> Iterator[list[Run]]:
    runs: list[Run] = []
    try:
        for _ in range(2):
            server = start_server(
                scratch / f"data-{len(list(scratch.iterdir()))}", model_cache, **env
            )
            runs.append(Run(server, server.client(login_over_http(server))))
        yield runs
    finally:
        for run in runs:
            run.server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--window", type=float, default=20.0, help="seconds of training")
    args = parser.parse_args()
    from app.ml.builtin import ensure_builtin_model

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp) / "services"
        scratch.mkdir()
        model_cache = Path(tmp) / "models"
        ensure_builtin_model(model_cache)
        for policy, env in POLICIES.items():
            with services(scratch, model_cache, env) as (one, two):
                rows.append(measure(policy, "alone", [one], args.window))
                with busy_core():
                    rows.append(measure(policy, "beside a busy core", [one], args.window))
                rows.append(measure(policy, "two trainings at once", [one, two], args.window))
                rows.append(
                    measure(policy, "playground questions", [one], args.window, questions=True)
                )
    alone = {row["policy"]: float(row["_speed"]) for row in rows if row["scenario"] == "alone"}
    columns = [c for c in rows[0] if not c.startswith("_")]
    print("\n| " + " | ".join([*columns, "x alone"]) + " |")
    print("|" + "---|" * (len(columns) + 1))
    for row in rows:
        ratio = float(row["_speed"]) / alone[row["policy"]]
        print("| " + " | ".join([*(row[c] for c in columns), f"{ratio:.2f}x"]) + " |")


if __name__ == "__main__":
    main()
