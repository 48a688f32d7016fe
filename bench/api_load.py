"""The API under 20 concurrent clients: latency idle and while a job trains, and what the
load costs the training.

    python -m bench.api_load [--clients 20] [--window 15]

One real service (`qatune serve`, embedded worker, SQLite). Each client is a thread with
its own connection and token, asking back to back (closed loop) for what a dashboard
polls: `GET /jobs/{id}`, `GET /jobs`, `GET /jobs/{id}/logs`, in turn. Three phases of
`--window` seconds: idle; while a job trains (qa30 x 4, 100 epochs: longer than the
window, cancelled after); and the job alone with no clients, for its tokens/s. The load
generator runs on the same 2 cores as the service: its own CPU is part of the picture.
"""

import argparse
import tempfile
import threading
import time
from pathlib import Path

from bench.contention import Latencies, Run, start_job
from tests.conftest import Server, login_over_http, start_server

ROUTES = ("/jobs/{id}", "/jobs", "/jobs/{id}/logs")


def load(server: Server, clients: int, job_id: int, window: float) -> tuple[Latencies, int]:
    latencies, errors = Latencies(), [0]
    lock = threading.Lock()
    stop = threading.Event()

    def client() -> None:
        api = server.client(login_over_http(server))
        seen: list[float] = []
        for turn in range(10**9):
            if stop.is_set():
                break
            path = ROUTES[turn % len(ROUTES)].format(id=job_id)
            started = time.perf_counter()
            response = api.get(path)
            seen.append(time.perf_counter() - started)
            if response.status_code != 200:
                with lock:
                    errors[0] += 1
        with lock:
            latencies.seconds.extend(seen)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    time.sleep(window)
    stop.set()
    for thread in threads:
        thread.join()
    return latencies, errors[0]


def training_tokens_per_second(run: Run, seconds: float) -> float:
    """The trainer's own tokens/s, averaged over its progress events in the next `seconds`."""
    after = run.api.get(f"/jobs/{run.job_id}/logs", params={"limit": 1000}).json()["next_after"]
    time.sleep(seconds)
    page = run.api.get(f"/jobs/{run.job_id}/logs", params={"after": after, "limit": 1000}).json()
    speeds = [
        e["data"]["tokens_per_second"]
        for e in page["events"]
        if e["data"].get("kind") == "progress"
    ]
    return sum(speeds) / len(speeds) if speeds else 0.0


def wait_for_training(run: Run) -> None:
    while True:
        page = run.api.get(f"/jobs/{run.job_id}/logs", params={"limit": 1000}).json()
        if any(e["data"].get("kind") == "progress" for e in page["events"]):
            return
        time.sleep(0.25)


def row(phase: str, latencies: Latencies, errors: int, window: float, speed: str) -> str:
    return (
        f"| {phase} | {len(latencies.seconds) / window:,.0f} | {latencies.p(0.5):.0f} | "
        f"{latencies.p(0.99):.0f} | {max(latencies.seconds) * 1000:.0f} | {errors} | {speed} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--window", type=float, default=15.0)
    args = parser.parse_args()
    from app.ml.builtin import ensure_builtin_model

    with tempfile.TemporaryDirectory() as tmp:
        model_cache = Path(tmp) / "models"
        ensure_builtin_model(model_cache)
        server = start_server(Path(tmp) / "data", model_cache)
        try:
            run = Run(server, server.client(login_over_http(server)))
            start_job(run)  # queued behind nothing: it starts at once
            wait_for_training(run)
            alone = training_tokens_per_second(run, args.window)
            loaded_speed: list[float] = []
            probe = threading.Thread(
                target=lambda: loaded_speed.append(training_tokens_per_second(run, args.window))
            )
            probe.start()
            busy, busy_errors = load(server, args.clients, run.job_id, args.window)
            probe.join()
            run.api.post(f"/jobs/{run.job_id}/cancel").raise_for_status()
            while run.api.get(f"/jobs/{run.job_id}").json()["status"] != "cancelled":
                time.sleep(0.25)
            idle, idle_errors = load(server, args.clients, run.job_id, args.window)
        finally:
            server.stop()
    print(
        f"\n{args.clients} clients, {args.window:g} s a phase\n\n"
        "| phase | requests/s | p50 ms | p99 ms | max ms | errors | training tok/s |\n"
        "|---|---:|---:|---:|---:|---:|---:|"
    )
    print(row("no job training", idle, idle_errors, args.window, "—"))
    print(
        row(
            "a job training", busy, busy_errors, args.window,
            f"{loaded_speed[0]:,.0f} ({loaded_speed[0] / alone:.2f}x of {alone:,.0f} alone)",
        )
    )  # fmt: skip
    print(f"\np99 while training / idle: {busy.p(0.99) / max(idle.p(0.99), 1e-9):.2f}x")


if __name__ == "__main__":
    main()
