"""Short chats through the official `openai` client: concurrent against one at a time.

    python -m bench.chat_clients [--answer-tokens 50]

One real service (`qatune serve`, SQLite) on the built-in model; two models fine-tuned
through the client itself (`fine_tuning.jobs.create`, 12 FAQ pairs each, defaults).
Then streamed chat completions of short answers (`max_tokens` 50, greedy), alternating
between the two models, each request from its own thread through one `OpenAI` client:
8 and 32 at once against the same requests one after another. Reported: the wall time
and tokens/s of each way, their ratio, and the time to the first content chunk (p50,
p99) of the concurrent requests. Client and server share this machine's cores.
"""

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.results import record
from tests.conftest import (
    Server,
    free_port,
    login_over_http,
    prepare_data_dir,
    qa_pairs,
    service_env,
)


def train(client: Any, pairs: list[dict[str, str]], suffix: str) -> str:
    """A fine-tuned model's name, trained through the client."""
    data = "".join(json.dumps(p) + "\n" for p in pairs).encode()
    file = client.files.create(file=(f"{suffix}.jsonl", data), purpose="fine-tune")
    job = client.fine_tuning.jobs.create(model="builtin:tiny", training_file=file.id, suffix=suffix)
    while (job := client.fine_tuning.jobs.retrieve(job.id)).status not in (
        "succeeded",
        "failed",
        "cancelled",
    ):
        time.sleep(1)
    if job.status != "succeeded":
        raise RuntimeError(f"training {suffix} ended {job.status}: {job.error}")
    return str(job.fine_tuned_model)


def one_chat(client: Any, model: str, question: str, tokens: int) -> tuple[float, float, int]:
    """(seconds to the first content chunk, seconds in all, completion tokens)."""
    started = time.perf_counter()
    first = None
    used = 0
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": question}],
        temperature=0,
        max_tokens=tokens,
        stream=True,
        stream_options={"include_usage": True},
    )
    for chunk in stream:
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter() - started
        if chunk.usage is not None:
            used = chunk.usage.completion_tokens
    total = time.perf_counter() - started
    return first if first is not None else total, total, used


def run_chats(
    client: Any, asks: list[tuple[str, str]], tokens: int, concurrent: bool
) -> tuple[float, list[float], int]:
    """Wall seconds, each request's time to first chunk, completion tokens in all."""
    results: list[tuple[float, float, int]] = [(0.0, 0.0, 0)] * len(asks)

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
    return wall, [r[0] for r in results], sum(r[2] for r in results)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answer-tokens", type=int, default=50)
    parser.add_argument(
        "--max-batch", type=int, help="QATUNE_SERVE_MAX_BATCH for the server (default: its own)"
    )
    args = parser.parse_args()
    from openai import OpenAI

    from app.ml.builtin import ensure_builtin_model

    pairs = qa_pairs()
    with tempfile.TemporaryDirectory() as tmp:
        model_cache = Path(tmp) / "models"
        ensure_builtin_model(model_cache)
        data_dir = Path(tmp) / "data"
        prepare_data_dir(data_dir, model_cache)
        extra = {"QATUNE_SERVE_MAX_BATCH": str(args.max_batch)} if args.max_batch else {}
        env = service_env(data_dir, **extra)
        server = Server(f"http://127.0.0.1:{free_port()}", data_dir, env)
        server.start()
        try:
            token = login_over_http(server)["Authorization"][7:]
            client = OpenAI(base_url=f"{server.url}/v1", api_key=token, max_retries=0)
            print("  training two models through the client …", file=sys.stderr, flush=True)
            plain = pairs[:12]
            shouted = [{**p, "answer": p["answer"].upper()} for p in plain]
            models = [train(client, plain, "plain"), train(client, shouted, "shouted")]
            for model in models:  # the adapters load before anything is timed
                one_chat(client, model, "hi", 4)
            lines = [
                f"Streamed chats of at most {args.answer_tokens} tokens, greedy, alternating "
                "between 2 fine-tuned models of builtin:tiny, through the official client"
                + (f"; QATUNE_SERVE_MAX_BATCH={args.max_batch}" if args.max_batch else ""),
                "",
                "| requests | one at a time s | at once s | tokens/s one at a time | at once "
                "| ratio | first chunk p50 | p99 |",
                "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            ]
            ratios: dict[str, float] = {}
            for count in (8, 32):
                asks = [(models[i % 2], pairs[i % len(pairs)]["question"]) for i in range(count)]
                print(f"  {count} chats …", file=sys.stderr, flush=True)
                alone, _, alone_tokens = run_chats(client, asks, args.answer_tokens, False)
                together, firsts, tokens = run_chats(client, asks, args.answer_tokens, True)
                ratio = (tokens / together) / (alone_tokens / alone)
                name = f"builtin:tiny {count} streamed chats over 2 models"
                ratios[f"{name} (at once / one at a time)"] = ratio
                lines.append(
                    f"| {count} | {alone:.2f} | {together:.2f} | {alone_tokens / alone:,.0f} | "
                    f"{tokens / together:,.0f} | {ratio:.2f}x | "
                    f"{statistics.median(firsts) * 1000:,.0f} ms | "
                    f"{percentile(firsts, 0.99) * 1000:,.0f} ms |"
                )
        finally:
            server.stop()
    print("\n".join(lines))
    command = "python -m bench.chat_clients " + " ".join(sys.argv[1:])
    print(f"\nRatios recorded in {record('chat_clients', ratios, command.strip())}")


if __name__ == "__main__":
    main()
