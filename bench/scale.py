"""How costs grow as a deployment does: a long job's page, sign-ins at once, bursts of
chats, adapters in rotation.

    python -m bench.scale [--events 1000 10000 100000] [--sign-ins 1 20 50] [--chats 64 256]
                          [--jobs 10 2000] [--adapters 4 200]

One real service (`qatune serve`, SQLite, `builtin:tiny`, no worker, so that a padded job
stays as it is), every size side by side in one run:

- events: a job holding N events, written into the server's SQLite file as its worker
  writes them (`pad_events`). Opening its page as the page does (`GET /jobs/{id}/series`,
  then the log's last 500 lines) against reading every event (`GET /jobs/{id}/logs`, 1,000
  a page: what the page's log stream replayed, and drew, before). Ratio: every event's
  time over the page's, per size.
- sign-ins: K correct sign-ins at once, each from its own address (a trusted proxy's
  `X-Forwarded-For`), while `/health` is probed every 20 ms from a process of its own;
  its p99 against idle, and the
  process's memory growth. Ratio: idle p99 over loaded p99 (1.0: no effect).
- chats: C streamed chats at once, 8 tokens each, from one address with its connection
  cap off: how many were answered. Ratio: answered over asked.
- jobs: J jobs of one user in the server's SQLite file (copies of one made through the API,
  each with its own storage key and a `team` label of ten), padded as the sizes grow. The
  list routes as the UI and the client call them: `GET /jobs?limit=20`,
  `GET /v1/fine_tuning/jobs?limit=20&metadata[team]=…` (the filter runs in the database),
  and one job's `GET /jobs/{id}`; p50 of 20 calls each. Ratio: the smallest size's p50 over
  each size's (1.0: flat).
- adapters: the serving engine itself (no HTTP, which adds the same to each), N random
  rank-16 adapters of `builtin:tiny` on one base with memory for all of them. Chats one
  after another, each for the next adapter in rotation, 8 tokens: p50 once every adapter
  was loaded once, against 4 adapters; five more adapters added on the engine's thread
  (the pause the running rows see) and asked for cold (read on the reader thread, then
  added), with N loaded; 32 chats at once over N adapters, tokens a second. Ratios: the 4 adapters'
  p50 over N's (1.0: no cost), an add with 4 loaded over an add with N.

The ratios go to bench/results for `python -m bench.compare`.
"""

import argparse
import asyncio
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import httpx
import psutil

from app.ml.events import Progress
from app.ml.memory import MemorySnapshot
from bench.results import record
from tests.conftest import ADMIN_PASSWORD, Server, login_over_http, qa_pairs, start_server

PAGE_LINES = 500


def pad_events(database: Path, job_id: int, seqs: range, total_steps: int) -> None:
    """Events as a training run writes them (app/services/jobs/lifecycle.py, add_event): a progress
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


def pad_jobs(database: Path, template_id: int, count: int) -> None:
    """`count` more jobs like `template_id`, each with its own storage key and team label."""
    with closing(sqlite3.connect(database)) as connection, connection:
        columns = [row[1] for row in connection.execute("PRAGMA table_info(jobs)")]
        columns.remove("id")
        made = {
            "storage_key": "lower(hex(randomblob(16)))",
            "labels": "json_object('team', 'team-' || abs(random() % 10))",
        }
        values = ", ".join(made.get(column, column) for column in columns)
        statement = (
            f"INSERT INTO jobs ({', '.join(columns)}) SELECT {values} FROM jobs WHERE id = ?"
        )
        connection.executemany(statement, [(template_id,)] * count)


def p50_of(api: httpx.Client, path: str, params: dict[str, object]) -> float:
    timings = []
    for _ in range(20):
        started = time.perf_counter()
        api.get(path, params=params).raise_for_status()  # type: ignore[arg-type]
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def jobs(server: Server, api: httpx.Client, sizes: list[int]) -> dict[str, float]:
    routes: dict[str, tuple[str, dict[str, object]]] = {
        "list": ("/jobs", {"limit": 20}),
        "openai_filtered": ("/v1/fine_tuning/jobs", {"limit": 20, "metadata[team]": "team-3"}),
    }
    template = int(api.post("/jobs", json={"qa_pairs": qa_pairs()[:4]}).json()["id"])
    database, have = server.data_dir / "qatune.db", int(api.get("/jobs").json()["total"])
    print("\n| jobs | GET /jobs | /v1/fine_tuning/jobs?metadata[team]= | GET /jobs/{id} |")
    print("|---:|---:|---:|---:|")
    first: dict[str, float] = {}
    ratios = {}
    for size in sizes:
        pad_jobs(database, template, max(0, size - have))
        have = max(have, size)
        found = {name: p50_of(api, path, params) for name, (path, params) in routes.items()}
        found["one"] = p50_of(api, f"/jobs/{template}", {})
        first = first or found
        for name, value in found.items():
            ratios[f"jobs_{size}_{name}_p50_ratio"] = first[name] / value
        print(
            f"| {size:,} | {found['list'] * 1000:.1f} ms | "
            f"{found['openai_filtered'] * 1000:.1f} ms | {found['one'] * 1000:.1f} ms |"
        )
    return ratios


# /health every 20 ms from a process of its own: in the load's process its 50 threads held
# the interpreter the probe needed, and the probe measured them (p99 180 ms; 43-48 ms apart).
PROBE = """
import json, sys, time, pathlib, httpx
url, stop = sys.argv[1], pathlib.Path(sys.argv[2])
latencies = []
with httpx.Client(base_url=url, timeout=30) as client:
    while not stop.exists():
        started = time.perf_counter()
        client.get("/health").raise_for_status()
        latencies.append(time.perf_counter() - started)
        time.sleep(0.02)
print(json.dumps(latencies))
"""


def health_while(server: Server, work: "threading.Thread | None") -> tuple[list[float], int]:
    """/health's latencies every 20 ms while `work` runs (2 s when None), and peak RSS."""
    assert server.process is not None
    process = psutil.Process(server.process.pid)
    peak = process.memory_info().rss
    with tempfile.TemporaryDirectory() as tmp:
        stop = Path(tmp) / "stop"
        probe = subprocess.Popen(
            [sys.executable, "-c", PROBE, server.url, str(stop)], stdout=subprocess.PIPE
        )
        time.sleep(0.5)  # the probe's imports done
        deadline = time.monotonic() + 2
        if work:
            work.start()
        while (work and work.is_alive()) or (not work and time.monotonic() < deadline):
            peak = max(peak, process.memory_info().rss)
            time.sleep(0.02)
        stop.touch()
        out, _ = probe.communicate(timeout=60)
    return json.loads(out), peak


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) > 1 else values[0]


def sign_ins(server: Server, counts: list[int]) -> dict[str, float]:
    # One client for every sign-in, with a connection each: a client per request built 50
    # TLS contexts on the server's two cores (~2 s of CPU), and the probe measured that
    # (p99 128-149 ms, the slow probes all before the first check had begun).
    client = httpx.Client(
        base_url=server.url, timeout=300, limits=httpx.Limits(max_connections=max(counts) + 10)
    )

    def sign_in(address: str) -> int:
        return client.post(
            "/auth/token",
            data={"username": "admin", "password": ADMIN_PASSWORD},
            headers={"X-Forwarded-For": address},
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
    client.close()
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


def random_adapters(model_dir: Path, root: Path, count: int) -> list[Path]:
    """`count` distinct adapters as qatune saves them, from one peft model re-drawn."""
    import torch
    from peft import LoraConfig, get_peft_model

    from app.ml.models import load_causal_lm, load_tokenizer
    from app.ml.training.adapter_files import save_adapter
    from app.ml.training.adapter_metadata import AdapterMetadata, now_iso
    from bench.adapters import TARGETS

    model = load_causal_lm(model_dir, dtype=torch.float32, device="cpu")
    config = LoraConfig(r=16, lora_alpha=32, target_modules=TARGETS, init_lora_weights=False)
    peft_model = get_peft_model(model, config)
    tokenizer = load_tokenizer(model_dir)
    metadata = AdapterMetadata(base_model="builtin:tiny", created_at=now_iso())
    directories = []
    for n in range(count):
        torch.manual_seed(n)
        with torch.no_grad():
            for name, weight in peft_model.named_parameters():
                if "lora_" in name:
                    weight.normal_(0, 0.05)
        directories.append(save_adapter(peft_model, tokenizer, root / f"a{n}", metadata))
    return directories


def adapters(model_dir: Path, root: Path, counts: list[int]) -> dict[str, float]:
    import torch

    from app.ml.data import prompt_ids
    from app.ml.models import load_causal_lm, load_tokenizer
    from app.ml.serving.engine import Engine
    from app.ml.serving.lora_bank import LoraBank, LoraWeights, read_lora
    from app.ml.serving.requests import AdapterRef, EngineLimits, GenerationRequest, Sampling
    from bench.serve_throughput import Waiter

    most = max(counts)
    directories = random_adapters(model_dir, root, most + 5)
    tokenizer = load_tokenizer(model_dir)
    prompt = prompt_ids(tokenizer, [{"role": "user", "content": "What is qatune?"}])

    def engine() -> Engine:
        def load() -> tuple[object, object]:
            model = load_causal_lm(model_dir, dtype=torch.bfloat16, device="cpu").eval()
            return model, tokenizer

        limits = EngineLimits(max_batch=32, max_adapter_bytes=2**40)
        return Engine(
            base_model="builtin:tiny", load=load, device="cpu", precision="bf16", limits=limits
        )

    def chat(served: Engine, n: int | None, tokens: int = 8) -> tuple[float, Waiter]:
        ref = None if n is None else AdapterRef(f"a{n}", directories[n])
        waiter = Waiter()
        sampling = Sampling(max_tokens=tokens, ignore_eos=True)
        started = time.perf_counter()
        served.submit(GenerationRequest(prompt, ref, sampling, waiter, time.monotonic() + 600))
        return started, waiter

    def median_add(bank: LoraBank | None, extra: list[LoraWeights]) -> float:
        assert bank is not None
        took = []
        for i, weights in enumerate(extra):
            started = time.perf_counter()
            bank.add(f"extra{i}", weights)
            took.append(time.perf_counter() - started)
        for i in range(len(extra)):
            bank.remove(f"extra{i}")
        return statistics.median(took)

    def one(served: Engine, n: int | None) -> float:
        started, waiter = chat(served, n)
        waiter.done.wait()
        return time.perf_counter() - started

    print(
        "\n| adapters in rotation | chat p50 (warm) | a chat for one more (cold) "
        "| adding it on the engine thread | 32 chats at once over them |"
        "\n|---:|---:|---:|---:|---:|"
    )
    p50s, loads, colds, ratios = {}, {}, {}, {}
    for count in counts:
        served = engine()
        try:
            one(served, None)
            for n in range(count):  # each loaded once
                one(served, n)
            rounds = max(2, 200 // count)
            p50s[count] = statistics.median(one(served, n % count) for n in range(rounds * count))
            # five more, each added on the engine's thread (what pauses the running rows)...
            extra = [read_lora(directories[n], torch.bfloat16) for n in range(most, most + 5)]
            bank = served.adapters.bank
            loads[count] = served.call(partial(median_add, bank, extra))
            # ...and asked for cold: read on the reader thread, added, then 8 tokens
            colds[count] = statistics.median(one(served, n) for n in range(most, most + 5))
            started = time.perf_counter()
            waiters = [chat(served, n % count, 32)[1] for n in range(32)]
            for waiter in waiters:
                waiter.done.wait()
            per_s = 32 * 32 / (time.perf_counter() - started)
        finally:
            served.close()
        print(
            f"| {count} | {p50s[count] * 1000:.1f} ms | {colds[count] * 1000:.1f} ms "
            f"| {loads[count] * 1000:.2f} ms | {per_s:,.0f} tok/s |"
        )
    smallest, largest = min(counts), max(counts)
    ratios[f"adapters_{largest}_p50_vs_{smallest}"] = p50s[smallest] / p50s[largest]
    ratios[f"adapters_load_{largest}_vs_{smallest}"] = loads[smallest] / loads[largest]
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--sign-ins", type=int, nargs="+", default=[1, 20, 50])
    parser.add_argument("--chats", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--jobs", type=int, nargs="+", default=[10, 2000])
    parser.add_argument("--adapters", type=int, nargs="+", default=[4, 200])
    args = parser.parse_args()
    from app.ml.builtin import ensure_builtin_model

    with tempfile.TemporaryDirectory() as tmp:
        model_cache = Path(tmp) / "models"
        model_dir = ensure_builtin_model(model_cache)
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
            ratios |= jobs(server, api, args.jobs)
        finally:
            server.stop()
        ratios |= adapters(model_dir, Path(tmp) / "adapters", args.adapters)
    command = "python -m bench.scale " + " ".join(
        f"--{name.replace('_', '-')} {' '.join(map(str, value))}"
        for name, value in vars(args).items()
    )
    print(f"\nwritten to {record('scale', ratios, command)}")


if __name__ == "__main__":
    main()
