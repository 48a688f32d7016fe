"""Short chats through the official `openai` client: concurrent against one at a time.

    python -m bench.chat_clients [--answer-tokens 50] [--max-batch N] [--intervals 0,50]
                                 [--shape tiny|qwen2.5-0.5b|smollm2-135m-instruct]
                                 [--rounds 3]

A real service (`qatune serve`, SQLite) on the built-in model (or a random model of the
Qwen2.5-0.5B shape, offered through QATUNE_BASE_MODELS, or the real SmolLM2-135M-Instruct,
three epochs) for each stream interval
(`QATUNE_SERVE_STREAM_INTERVAL_MS`; 0, every token its own chunk, is the baseline); two
models fine-tuned through the client itself (`fine_tuning.jobs.create`, 12 FAQ pairs
each, defaults; one epoch on the 0.5B shape). Then streamed chat completions of short
answers (`max_tokens` 50, greedy), alternating between the two models, each request from
its own thread through one `OpenAI` client: 8 and 32 at once against the same requests
one after another. Each way runs 3 times (`--rounds`), alternating (timings here swing
10-20% run to run); reported: the median round's wall times, each way's median tokens/s
and their ratio, the chunks the client read, the CPU the server and the client used per
chat (both ways), and the time to the first content chunk (p50, p99) of the requests at
once. Before them, what a request costs by itself: the median time of `GET /health`,
`GET /v1/models` and a 1-token chat (through httpx, and streamed through the client).
Client and server share this machine's cores.
"""

import argparse
import json
import resource
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from app.ml.builtin import BUILTIN_TINY
from bench.real_model import CACHE, REAL, real_model_dir
from bench.results import record
from tests.conftest import login_over_http, qa_pairs, start_server


def train(
    client: Any, pairs: list[dict[str, str]], suffix: str, base: str = BUILTIN_TINY, **hyper: Any
) -> str:
    """A fine-tuned model's name, trained through the client."""
    data = "".join(json.dumps(p) + "\n" for p in pairs).encode()
    file = client.files.create(file=(f"{suffix}.jsonl", data), purpose="fine-tune")
    extra = {"hyperparameters": hyper} if hyper else {}
    job = client.fine_tuning.jobs.create(model=base, training_file=file.id, suffix=suffix, **extra)
    while (job := client.fine_tuning.jobs.retrieve(job.id)).status not in (
        "succeeded",
        "failed",
        "cancelled",
    ):
        time.sleep(1)
    if job.status != "succeeded":
        raise RuntimeError(f"training {suffix} ended {job.status}: {job.error}")
    return str(job.fine_tuned_model)


@dataclass(frozen=True)
class Chat:
    first_chunk_s: float  # to the first content chunk
    total_s: float
    tokens: int  # completion tokens
    chunks: int  # read by the client, the role's and the usage's included


def one_chat(client: Any, model: str, question: str, tokens: int) -> Chat:
    started = time.perf_counter()
    first = None
    used = chunks = 0
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": question}],
        temperature=0,
        max_tokens=tokens,
        stream=True,
        stream_options={"include_usage": True},
    )
    for chunk in stream:
        chunks += 1
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter() - started
        if chunk.usage is not None:
            used = chunk.usage.completion_tokens
    total = time.perf_counter() - started
    return Chat(first if first is not None else total, total, used, chunks)


def run_chats(
    client: Any, asks: list[tuple[str, str]], tokens: int, concurrent: bool
) -> tuple[float, list[Chat]]:
    """Wall seconds, and each request's chat."""
    results: list[Chat] = [Chat(0.0, 0.0, 0, 0)] * len(asks)

    def ask(i: int) -> None:
        results[i] = one_chat(client, *asks[i], tokens)

    started = time.perf_counter()
    if concurrent:
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(asks))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    else:
        for i in range(len(asks)):
            ask(i)
    wall = time.perf_counter() - started
    return wall, results


def tokens_per_s(run: tuple[float, list[Chat]]) -> float:
    wall, chats = run
    return sum(c.tokens for c in chats) / wall


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answer-tokens", type=int, default=50)
    parser.add_argument(
        "--max-batch", type=int, help="QATUNE_SERVE_MAX_BATCH for the server (default: its own)"
    )
    parser.add_argument(
        "--intervals", default="0,50", help="QATUNE_SERVE_STREAM_INTERVAL_MS values, side by side"
    )
    parser.add_argument("--shape", choices=["tiny", "qwen2.5-0.5b", REAL], default="tiny")
    parser.add_argument("--rounds", type=int, default=3, help="each way, alternating")
    args = parser.parse_args()
    intervals = [int(ms) for ms in args.intervals.split(",")]
    model = BUILTIN_TINY if args.shape == "tiny" else args.shape
    lines = [
        f"Streamed chats of at most {args.answer_tokens} tokens, greedy, alternating between "
        f"2 fine-tuned models of {model}, through the official client"
        + (f"; QATUNE_SERVE_MAX_BATCH={args.max_batch}" if args.max_batch else ""),
        "",
        "| stream interval | requests | one at a time s | at once s | tokens/s one at a time "
        "| at once | ratio | chunks per answer | server CPU per chat | client CPU per chat "
        "| first chunk p50 | p99 |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    ratios: dict[str, float] = {}
    baseline: dict[int, Rates] = {}  # the first interval's, by requests
    cost_lines = [
        "",
        "Median ms of a request by itself (50 each, one after another):",
        "",
        "| stream interval | " + " | ".join(COSTS) + " |",
        "| ---: | " + " | ".join("---:" for _ in COSTS) + " |",
    ]
    for interval in intervals:
        rows, costs = measure(args, interval)
        cost_lines.append(f"| {interval} ms | " + " | ".join(f"{ms:.1f}" for ms in costs) + " |")
        for count, row, rates in rows:
            lines.append(f"| {interval} ms {row}")
            name = f"{model} {count} streamed chats over 2 models, interval {interval} ms"
            ratios[f"{name} (at once / one at a time)"] = rates.together / rates.alone
            first = baseline.setdefault(count, rates)
            if first is not rates:
                for way, now, then in [
                    ("at once", rates.together, first.together),
                    ("one at a time", rates.alone, first.alone),
                ]:
                    ratios[f"{name}, {way} (tokens/s / interval {intervals[0]} ms)"] = now / then
    print("\n".join(lines + cost_lines))
    command = "python -m bench.chat_clients " + " ".join(sys.argv[1:])
    print(f"\nRatios recorded in {record('chat_clients', ratios, command.strip())}")


class CpuUse:
    """CPU seconds the server process and this one (the client) used since it was made."""

    def __init__(self, server_pid: int) -> None:
        self.server = psutil.Process(server_pid)
        self.start = self._now()

    def _now(self) -> tuple[float, float]:
        server = self.server.cpu_times()
        client = resource.getrusage(resource.RUSAGE_SELF)
        return server.user + server.system, client.ru_utime + client.ru_stime

    def per_request(self, requests: int) -> tuple[float, float]:
        (server, client), (server0, client0) = self._now(), self.start
        return (server - server0) / requests, (client - client0) / requests


@dataclass(frozen=True)
class Rates:
    alone: float  # tokens/s, one at a time
    together: float  # tokens/s, at once


COSTS = ["GET /health", "GET /v1/models", "1-token chat (httpx)", "1-token chat, streamed (client)"]


def request_costs(url: str, token: str, client: Any, model: str) -> list[float]:
    """Median ms of requests that decode (almost) nothing: what a request costs by itself."""
    import httpx

    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as http:
        ways = [
            lambda: http.get("/health"),
            lambda: http.get("/v1/models"),
            lambda: http.post("/v1/chat/completions", json={**body, "temperature": 0}),
            lambda: one_chat(client, model, "hi", 1),
        ]
        medians = []
        for way in ways:
            for _ in range(5):
                way()
            times = []
            for _ in range(50):
                started = time.perf_counter()
                way()
                times.append(time.perf_counter() - started)
            medians.append(statistics.median(times) * 1000)
    return medians


def measure(
    args: argparse.Namespace, interval: int
) -> tuple[list[tuple[int, str, Rates]], list[float]]:
    """One server with this stream interval: (requests, table row, rates) for 8 and 32, and
    the request costs (COSTS)."""
    from openai import OpenAI

    from app.ml.builtin import ensure_builtin_model
    from bench.train_throughput import make_model

    pairs = qa_pairs()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        # the real model is read into the benchmarks' cache once, not again each run
        model_cache = CACHE if args.shape == REAL else Path(tmp) / "models"
        ensure_builtin_model(model_cache)
        extra = {"QATUNE_SERVE_STREAM_INTERVAL_MS": str(interval)}
        base, hyper = BUILTIN_TINY, {}
        if args.shape == REAL:  # a built-in; a few epochs teach it 12 answers
            base, hyper = REAL, {"n_epochs": 3}
            real_model_dir()
        elif args.shape != "tiny":  # offered to every user by its path; one epoch will do
            base = str(make_model(args.shape, Path(tmp) / "shapes"))
            extra["QATUNE_BASE_MODELS"] = json.dumps([base])
            hyper = {"n_epochs": 1}
        if args.max_batch:
            extra["QATUNE_SERVE_MAX_BATCH"] = str(args.max_batch)
        server = start_server(Path(tmp) / "data", model_cache, **extra)
        try:
            assert server.process is not None
            server_pid = server.process.pid
            token = login_over_http(server)["Authorization"][7:]
            client = OpenAI(base_url=f"{server.url}/v1", api_key=token, max_retries=0)
            print(f"  interval {interval} ms: training two models …", file=sys.stderr, flush=True)
            plain = pairs[:12]
            shouted = [{**p, "answer": p["answer"].upper()} for p in plain]
            models = [
                train(client, plain, "plain", base, **hyper),
                train(client, shouted, "shouted", base, **hyper),
            ]
            for model in models:  # the adapters load before anything is timed
                one_chat(client, model, "hi", 4)
            costs = request_costs(server.url, token, client, models[0])
            for count in (8, 32):
                asks = [(models[i % 2], pairs[i % len(pairs)]["question"]) for i in range(count)]
                print(f"  {count} chats …", file=sys.stderr, flush=True)
                cpu = CpuUse(server_pid)
                rounds = [
                    (
                        run_chats(client, asks, args.answer_tokens, False),
                        run_chats(client, asks, args.answer_tokens, True),
                    )
                    for _ in range(args.rounds)
                ]
                # the round whose concurrent rate is the median; each way's rate its median
                rounds.sort(key=lambda r: tokens_per_s(r[1]))
                (alone, _), (together, chats) = rounds[len(rounds) // 2]
                server_cpu, client_cpu = cpu.per_request(len(rounds) * 2 * count)
                alone_rate = statistics.median(tokens_per_s(a) for a, _ in rounds)
                rate = statistics.median(tokens_per_s(t) for _, t in rounds)
                firsts = [c.first_chunk_s for c in chats]
                chunks = sum(c.chunks for c in chats) / len(chats)
                rows.append(
                    (
                        count,
                        f"| {count} | {alone:.2f} | {together:.2f} | {alone_rate:,.0f} | "
                        f"{rate:,.0f} | {rate / alone_rate:.2f}x | {chunks:.1f} | "
                        f"{server_cpu * 1000:.0f} ms | {client_cpu * 1000:.0f} ms | "
                        f"{statistics.median(firsts) * 1000:,.0f} ms | "
                        f"{percentile(firsts, 0.99) * 1000:,.0f} ms |",
                        Rates(alone_rate, rate),
                    )
                )
        finally:
            server.stop()
    return rows, costs


if __name__ == "__main__":
    main()
