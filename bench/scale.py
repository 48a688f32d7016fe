"""How costs grow as a deployment does: a long job's page, sign-ins at once, bursts of chats.

    python -m bench.scale [--events 1000 10000 100000] [--sign-ins 1 20 50] [--chats 64 256]

One real service (`qatune serve`, SQLite, `builtin:tiny`, no worker, so that a padded job
stays as it is), every size side by side in one run:

- events: a job holding N events, written into the server's SQLite file as its worker
  writes them (`pad_events`). Opening its page as the page does (`GET /jobs/{id}/series`,
  then the log's last 500 lines) against reading every event (`GET /jobs/{id}/logs`, 1,000
  a page: what the page's log stream replayed, and drew, before). Ratio: every event's
  time over the page's, per size.
- sign-ins: K correct sign-ins at once, each from its own address (a trusted proxy's
  `X-Forwarded-For`), while `/health` is probed every 20 ms; its p99 against idle, and the
  process's memory growth. Ratio: idle p99 over loaded p99 (1.0: no effect).
- chats: C streamed chats at once, 8 tokens each, from one address with its connection
  cap off: how many were answered. Ratio: answered over asked.

The ratios go to bench/results for `python -m bench.compare`.
"""

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psutil

from app.ml.events import Progress
from app.ml.memory import MemorySnapshot
from bench.results import record
from tests.conftest import ADMIN_PASSWORD, Server, login_over_http, qa_pairs, start_server

PAGE_LINES = 500


def pad_events(database: Path, job_id: int, seqs: range, total_steps: int) -> None:
    """Events as a training run writes them (app/services/jobs.py, add_event): a progress
    event a step, its figures beside it in job_curve, a line between."""
    memory = MemorySnapshot(rss_mb=900.0)
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    rows, curve = [], []
    for seq in seqs:
        step = seq // 2
        data = "{}"  # a message alone
        if seq % 2 == 0:
            progress = Progress(
                step=step, total_steps=total_steps, epoch=step / 100,
                loss=2.0 / (1 + step / 5000), learning_rate=2e-4, tokens_per_second=400.0,
                eta_seconds=100.0, memory=memory,
            )  # fmt: skip
            data = progress.model_dump_json()
            curve.append((job_id, seq, step, progress.loss))
        rows.append((job_id, seq, now, "INFO", f"line {seq}: step {step}", data))
    with closing(sqlite3.connect(database, timeout=30)) as connection, connection:
        connection.executemany(
            "INSERT INTO job_events (job_id, seq, ts, level, message, data) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
        connection.executemany(
            "INSERT INTO job_curve (job_id, seq, step, loss) VALUES (?, ?, ?, ?)", curve
        )


def last_seq(database: Path, job_id: int) -> int:
    with closing(sqlite3.connect(database)) as connection:
        (seq,) = connection.execute(
            "SELECT max(seq) FROM job_events WHERE job_id = ?", (job_id,)
        ).fetchone()
    return int(seq or 0)


def padded_job(server: Server, api: httpx.Client, events: int) -> int:
    job_id = int(api.post("/jobs", json={"qa_pairs": qa_pairs()[:4]}).json()["id"])
    database = server.data_dir / "qatune.db"
    first = last_seq(database, job_id) + 1
    pad_events(database, job_id, range(first, first + events), total_steps=events)
    return job_id


def open_page(api: httpx.Client, job_id: int) -> float:
    started = time.perf_counter()
    api.get(f"/jobs/{job_id}/series").raise_for_status()
    tail = {"before": 2**53 - 1, "limit": PAGE_LINES}
    api.get(f"/jobs/{job_id}/logs", params=tail).raise_for_status()
    return time.perf_counter() - started


def read_every_event(api: httpx.Client, job_id: int) -> float:
    started, after = time.perf_counter(), 0
    while True:
        page = api.get(f"/jobs/{job_id}/logs", params={"after": after, "limit": 1000}).json()
        if not page["events"]:
            return time.perf_counter() - started
        after = page["next_after"]


def events(server: Server, api: httpx.Client, sizes: list[int]) -> dict[str, float]:
    print(
        "\n| events | page (series + last 500 lines) | every event | ratio |\n|---:|---:|---:|---:|"
    )
    ratios = {}
    for size in sizes:
        job_id = padded_job(server, api, size)
        page = min(open_page(api, job_id) for _ in range(3))
        every = min(read_every_event(api, job_id) for _ in range(2 if size <= 10_000 else 1))
        ratios[f"events_{size}_every_over_page"] = every / page
        print(f"| {size:,} | {page * 1000:.0f} ms | {every * 1000:,.0f} ms | {every / page:.1f}x |")
    return ratios


def health_while(server: Server, work: "threading.Thread | None") -> tuple[list[float], int]:
    """/health's latencies every 20 ms while `work` runs (2 s when None), and peak RSS."""
    assert server.process is not None
    process = psutil.Process(server.process.pid)
    latencies, peak = [], process.memory_info().rss
    deadline = time.monotonic() + 2
    with httpx.Client(base_url=server.url, timeout=30) as client:
        if work:
            work.start()
        while (work and work.is_alive()) or (not work and time.monotonic() < deadline):
            started = time.perf_counter()
            client.get("/health").raise_for_status()
            latencies.append(time.perf_counter() - started)
            peak = max(peak, process.memory_info().rss)
            time.sleep(0.02)
    return latencies, peak


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) > 1 else values[0]


def sign_ins(server: Server, counts: list[int]) -> dict[str, float]:
    def sign_in(address: str) -> int:
        return httpx.post(
            f"{server.url}/auth/token",
            data={"username": "admin", "password": ADMIN_PASSWORD},
            headers={"X-Forwarded-For": address},
            timeout=300,
        ).status_code

    sign_in("10.0.0.1")  # argon2 and its pool warmed up
    idle, idle_rss = health_while(server, None)
    print(
        "\n| sign-ins at once | signed in | took | /health p50 | /health p99 | memory |\n"
        "|---:|---:|---:|---:|---:|---:|"
    )
    print(
        f"| 0 | — | — | {statistics.median(idle) * 1000:.1f} ms | {p99(idle) * 1000:.1f} ms | — |"
    )
    ratios = {}
    for count in counts:
        statuses: list[int] = []

        def burst(count: int = count, statuses: list[int] = statuses) -> None:
            with ThreadPoolExecutor(count) as pool:
                statuses.extend(
                    pool.map(sign_in, [f"10.1.{n // 250}.{n % 250}" for n in range(count)])
                )

        work = threading.Thread(target=burst)
        started = time.monotonic()
        loaded, peak = health_while(server, work)
        took = time.monotonic() - started
        grown = (peak - idle_rss) / 2**20
        ratios[f"sign_ins_{count}_idle_over_loaded_p99"] = p99(idle) / p99(loaded)
        print(
            f"| {count} | {statuses.count(200)} | {took:.1f} s | "
            f"{statistics.median(loaded) * 1000:.1f} ms | {p99(loaded) * 1000:.1f} ms | "
            f"+{grown:.0f} MiB |"
        )
    return ratios


def chats(server: Server, headers: dict[str, str], counts: list[int]) -> dict[str, float]:
    async def one(client: httpx.AsyncClient, n: int) -> bool:
        body = {
            "model": "builtin:tiny",
            "messages": [{"role": "user", "content": f"question {n}"}],
            "max_tokens": 8,
            "stream": True,
        }
        async with client.stream("POST", "/v1/chat/completions", json=body) as response:
            lines = [line async for line in response.aiter_lines()]
        return response.status_code == 200 and "data: [DONE]" in lines

    async def burst(count: int) -> list[bool]:
        limits = httpx.Limits(max_connections=count + 10)
        async with httpx.AsyncClient(
            base_url=server.url, headers=headers, timeout=600, limits=limits
        ) as client:
            return await asyncio.gather(*(one(client, n) for n in range(count)))

    asyncio.run(burst(4))  # the engine loaded
    print("\n| streamed chats at once | answered | refused | took |\n|---:|---:|---:|---:|")
    ratios = {}
    for count in counts:
        started = time.monotonic()
        answered = sum(asyncio.run(burst(count)))
        took = time.monotonic() - started
        ratios[f"chats_{count}_answered_share"] = answered / count
        print(f"| {count} | {answered} | {count - answered} | {took:.1f} s |")
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--sign-ins", type=int, nargs="+", default=[1, 20, 50])
    parser.add_argument("--chats", type=int, nargs="+", default=[64, 256])
    args = parser.parse_args()
    from app.ml.builtin import ensure_builtin_model

    with tempfile.TemporaryDirectory() as tmp:
        model_cache = Path(tmp) / "models"
        ensure_builtin_model(model_cache)
        server = start_server(
            Path(tmp) / "data",
            model_cache,
            QATUNE_EMBEDDED_WORKER="false",
            QATUNE_TRUSTED_PROXIES="127.0.0.1",
            QATUNE_MAX_CONNECTIONS_PER_SOURCE="0",
        )
        try:
            headers = login_over_http(server)
            api = server.client(headers)
            ratios = events(server, api, args.events)
            ratios |= sign_ins(server, args.sign_ins)
            ratios |= chats(server, headers, args.chats)
        finally:
            server.stop()
    command = "python -m bench.scale " + " ".join(
        f"--{name.replace('_', '-')} {' '.join(map(str, value))}"
        for name, value in vars(args).items()
    )
    print(f"\nwritten to {record('scale', ratios, command)}")


if __name__ == "__main__":
    main()
