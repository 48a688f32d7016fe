"""Serving throughput, side by side: qatune's engine against one-at-a-time `generate`.

    python -m bench.serve_throughput [--shape tiny|qwen2.5-0.5b|smollm2-135m-instruct|all]
                                     [--tokens N]
    python -m bench.serve_throughput --against vllm [--shape …]   (bench/serve_backends.py)

For each shape (the built-in model, Qwen2.5-0.5B's shape random-initialised as in
bench/train_throughput.py, and the real SmolLM2-135M-Instruct of bench/real_model.py),
with four random LoRA adapters (r=16, all linear layers):

  single     one request alone, greedy, exactly N new tokens: the engine (which merges
             the one adapter in use) against raw `model.generate` of the merged model,
             same dtype, same length, prefill included in both
  concurrent 8 requests at once over the 4 adapters: the engine (continuous batching)
             against the same 8 served one at a time with `generate` and set_adapter, as
             the query service did before; aggregate tokens/s, time to first token
  step       one decode step of 8 rows over 4 adapters: 4 forwards of 2 rows grouped by
             adapter, peft's per-row adapter_names in one forward, each row's A and B
             gathered for two bmm by a forward hook (LoRAX's and vLLM's way, written
             here), and the engine's stacked adapters (side by side) in one forward
  adapters   the time to load an adapter and to switch the active one, and the bytes
             each cached adapter holds
  bound      bytes of weights read per decode step ÷ this machine's measured memory
             bandwidth: the most tokens/s one request could decode

Greedy throughout, `ignore_eos` so every request is exactly N tokens; the device and
precision are this machine's device plan (bf16 autocast on a CPU with AVX-512 BF16).
"""

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import torch

from app.ml.builtin import BUILTIN_TINY, ensure_builtin_model
from app.ml.data import prompt_ids
from app.ml.device import plan_device, probe_capabilities
from app.ml.models import load_causal_lm, load_tokenizer
from app.ml.precision import DTYPES, autocast_for
from app.ml.serving.batch import KV_CACHE
from app.ml.serving.engine import Engine
from app.ml.serving.lora_bank import LoraBank, read_lora
from app.ml.serving.requests import (
    AdapterRef,
    EngineEvent,
    EngineLimits,
    Finished,
    GenerationRequest,
    Sampling,
)
from bench.adapters import random_adapter
from bench.real_model import REAL, real_model_dir
from bench.results import record
from bench.train_throughput import make_model

QUESTION = "How do I resume a paused fine-tuning job from its newest checkpoint?"


def load(model_dir: Path, precision: str) -> Any:
    return load_causal_lm(model_dir, dtype=DTYPES[precision], device="cpu").eval()


def generate_n(model: Any, ids: torch.Tensor, tokens: int, precision: str) -> float:
    """Seconds for raw generate to make exactly `tokens` tokens, greedy."""
    started = time.perf_counter()
    with torch.inference_mode(), autocast_for("cpu", precision):
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=tokens,
            min_new_tokens=tokens,
            do_sample=False,
            pad_token_id=0,
        )
    assert out.shape[1] - ids.shape[1] == tokens
    return time.perf_counter() - started


class Waiter:
    """A request's end: its Finished, and when it came."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.finished: Finished | None = None
        self.at = 0.0

    def __call__(self, event: EngineEvent) -> None:
        if isinstance(event, Finished):
            self.finished, self.at = event, time.monotonic()
            self.done.set()


SHAPES = ("tiny", "qwen2.5-0.5b", REAL)


def bench_model(shape: str, scratch: Path) -> tuple[Path, str]:
    """A shape's model directory and the name qatune knows it by."""
    if shape == "tiny":
        return ensure_builtin_model(scratch / "models"), BUILTIN_TINY
    if shape == REAL:  # the real model, read once into the benchmarks' cache
        return real_model_dir(), REAL
    model_dir = make_model(shape, scratch / "models")
    return model_dir, str(model_dir)


def engine_run(
    engine: Engine, prompt: list[int], adapters: list[AdapterRef | None], tokens: int
) -> tuple[float, list[float]]:
    """Wall seconds for all requests at once, and each one's time to first token."""
    requests = []
    started = time.perf_counter()
    for adapter in adapters:
        waiter = Waiter()
        sampling = Sampling(max_tokens=tokens, ignore_eos=True)
        request = GenerationRequest(prompt, adapter, sampling, waiter, time.monotonic() + 3600)
        engine.submit(request)
        requests.append((request, waiter))
    for _, waiter in requests:
        waiter.done.wait()
        assert waiter.finished is not None and waiter.finished.completion_tokens == tokens
    wall = time.perf_counter() - started
    ttft = [(r.first_token_at or 0) - r.submitted_at for r, _ in requests]
    return wall, ttft


def bandwidth_gbs() -> float:
    """Memory bandwidth as a large copy sees it (bytes read + written per second)."""
    source = torch.empty(256 * 2**20, dtype=torch.uint8)
    source.fill_(1)
    target = torch.empty_like(source)
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        target.copy_(source)
        best = min(best, time.perf_counter() - started)
    return 2 * source.numel() / best / 1e9


def step_ways(
    model: Any, adapters: list[AdapterRef], prompt: list[int], precision: str
) -> dict[str, float]:
    """Seconds per decode step of 8 rows over 4 adapters, three ways: 4 forwards grouped
    by adapter, one forward with peft's per-row adapter_names, one forward stacked."""
    from transformers import DynamicCache

    keys = [a.key for a in adapters]
    names = [keys[i % 4] for i in range(8)]
    ids = torch.tensor([prompt] * 8)
    token = torch.zeros(8, 1, dtype=torch.long)
    steps = 16

    def prefill(batch: torch.Tensor, **extra: Any) -> Any:
        cache = DynamicCache(config=model.config)
        model(input_ids=batch, **{KV_CACHE: cache}, use_cache=True, logits_to_keep=1, **extra)
        return cache

    def timed(step: Any) -> float:
        started = time.perf_counter()
        for _ in range(steps):
            step()
        return (time.perf_counter() - started) / steps

    seconds = {}
    with torch.inference_mode(), autocast_for("cpu", precision):
        caches = []
        for key in keys:
            model.set_adapter(key)
            caches.append(prefill(ids[:2]))

        def grouped() -> None:
            for key, group_cache in zip(keys, caches, strict=True):
                model.set_adapter(key)
                model(input_ids=token[:2], **{KV_CACHE: group_cache}, logits_to_keep=1)

        seconds["grouped"] = timed(grouped)
        cache = prefill(ids, adapter_names=names)
        seconds["peft"] = timed(
            lambda: model(
                input_ids=token, **{KV_CACHE: cache}, logits_to_keep=1, adapter_names=names
            )
        )
        hooks = gathered_hooks(model, keys, names, DTYPES[precision])
        cache = prefill(ids)
        seconds["gathered"] = timed(
            lambda: model(input_ids=token, **{KV_CACHE: cache}, logits_to_keep=1)
        )
        for hook in hooks:
            hook.remove()
        # the engine's way: the bank's own weights, peft's layers left off
        dtype = DTYPES[precision]
        bank = LoraBank(model.get_base_model(), merge_budget_bytes=0, device="cpu", dtype=dtype)
        for adapter in adapters:
            bank.add(adapter.key, read_lora(adapter.directory, dtype))
        bank.forward_options(names)
        cache = prefill(ids)
        seconds["stacked"] = timed(
            lambda: model(input_ids=token, **{KV_CACHE: cache}, logits_to_keep=1)
        )
        bank.release()
        model.base_model.enable_adapter_layers()  # peft's own forward again
    return seconds


def gathered_hooks(model: Any, keys: list[str], names: list[str], dtype: torch.dtype) -> list[Any]:
    """peft's adapters off, and on each LoRA layer a hook adding every row's delta with its
    own A and B gathered by slot: x·A[slot]·B[slot] as two bmm (the removers returned)."""
    from peft.tuners.lora import LoraLayer

    model.base_model.disable_adapter_layers()
    rows = torch.tensor([keys.index(name) for name in names])
    hooks = []
    layers: list[Any] = [m for m in model.modules() if isinstance(m, LoraLayer)]
    for layer in layers:
        if keys[0] not in layer.lora_A:
            continue
        a = torch.stack([layer.lora_A[k].weight.detach().t() for k in keys]).to(dtype)
        b = torch.stack([layer.lora_B[k].weight.detach().t() * layer.scaling[k] for k in keys])
        b = b.to(dtype)

        def add_rows(
            layer: Any, args: Any, output: torch.Tensor, a: Any = a, b: Any = b
        ) -> torch.Tensor:
            low = torch.bmm(args[0].to(a.dtype), a.index_select(0, rows))
            return output + torch.bmm(low, b.index_select(0, rows)).to(output.dtype)

        hooks.append(layer.register_forward_hook(add_rows))
    return hooks


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def bench_shape(shape: str, tokens: int, scratch: Path) -> tuple[list[str], dict[str, float]]:
    """The shape's tables, and the engine's ratios over its baselines."""
    from peft import PeftModel

    precision = plan_device(probe_capabilities(), "cpu").precision
    model_dir, name = bench_model(shape, scratch)
    tokenizer = load_tokenizer(model_dir)
    prompt = prompt_ids(tokenizer, [{"role": "user", "content": QUESTION}])
    ids = torch.tensor([prompt])
    lines = [f"### {shape} ({precision}, prompt {len(prompt)} tokens, {tokens} new tokens)", ""]
    # Everything that computes runs on the engine's thread (engine.call), baselines too:
    # one OpenMP team, as in the service (a second thread's team slows the first).
    engine = Engine(
        base_model=name,
        load=lambda: (load(model_dir, precision), tokenizer),
        device="cpu",
        precision=precision,
        limits=EngineLimits(max_batch=8, max_adapters=4),
    )
    adapters = [
        AdapterRef(
            f"a{i}",
            engine.call(
                lambda i=i: random_adapter(  # type: ignore[misc]
                    model_dir, scratch / shape / f"a{i}", base_model=name, seed=i
                )
            ),
        )
        for i in range(4)
    ]

    # Single: raw generate on the merged model, against the engine serving the adapter.
    def raw_generate() -> float:
        merged = PeftModel.from_pretrained(load(model_dir, precision), adapters[0].directory)
        # As a user would load a merged model: trainable-by-default parameters. (peft
        # freezes them, and a frozen bf16 weight takes torch's slow path in prefill.)
        merged = merged.merge_and_unload().eval().requires_grad_(True)
        generate_n(merged, ids, 4, precision)  # warm-up
        return statistics.median(generate_n(merged, ids, tokens, precision) for _ in range(3))

    raw = engine.call(raw_generate)
    rss_before = rss_mb()
    started = time.perf_counter()
    engine_run(engine, prompt, [adapters[0]], 1)  # loads the first adapter
    first_load = time.perf_counter() - started
    rss_after = rss_mb()
    load_times = []
    for adapter in adapters[1:]:
        started = time.perf_counter()
        engine_run(engine, prompt, [adapter], 1)
        load_times.append(time.perf_counter() - started)
    single = statistics.median(
        engine_run(engine, prompt, [adapters[0]], tokens)[0] for _ in range(3)
    )
    lines += [
        "| one request alone | tokens/s | ratio |",
        "|---|---:|---:|",
        f"| raw `generate`, merged model | {tokens / raw:,.0f} | 1.00x |",
        f"| qatune engine (one adapter in use: merged) | {tokens / single:,.0f} "
        f"| {raw / single:.2f}x |",
        "",
    ]

    # Concurrent: 8 requests over 4 adapters.
    mix: list[AdapterRef | None] = [adapters[i % 4] for i in range(8)]
    wall, ttft = engine_run(engine, prompt, mix, tokens)

    def baseline() -> tuple[Any, float, list[float]]:
        model: Any = PeftModel.from_pretrained(
            load(model_dir, precision), adapters[0].directory, adapter_name="a0"
        )
        for adapter in adapters[1:]:
            model.load_adapter(adapter.directory, adapter_name=adapter.key)
        model.eval()
        # Spared torch's slow path as the engine is (below), so the ratio is batching's.
        head: Any = model.get_base_model().get_output_embeddings()
        head.weight.requires_grad_(True)
        started = time.perf_counter()
        done_at = []
        for ref in adapters * 2:  # the same 8 requests as `mix`
            model.set_adapter(ref.key)
            generate_n(model, ids, tokens, precision)
            done_at.append(time.perf_counter() - started)
        return model, time.perf_counter() - started, done_at

    baseline_model, sequential, done_at = engine.call(baseline)
    total = 8 * tokens
    lines += [
        "| 8 concurrent, 4 adapters | tokens/s (all) | ratio | first token p50 | p99 |",
        "|---|---:|---:|---:|---:|",
        f"| one at a time (`generate`, set_adapter; whole answers) | {total / sequential:,.0f} "
        "| 1.00x "
        f"| {statistics.median(done_at) * 1000:,.0f} ms | {max(done_at) * 1000:,.0f} ms |",
        f"| qatune engine (continuous batching, streamed) | {total / wall:,.0f} | "
        f"{sequential / wall:.2f}x | {statistics.median(ttft) * 1000:,.0f} ms | "
        f"{max(ttft) * 1000:,.0f} ms |",
        "",
    ]

    # Mixed versus grouped decode step, on the baseline model (4 adapters loaded).
    ways = engine.call(lambda: step_ways(baseline_model, adapters, prompt, precision))
    grouped = ways["grouped"]
    lines += [
        "| one decode step, 8 rows over 4 adapters | ms | ratio |",
        "|---|---:|---:|",
        f"| grouped: 4 forwards of 2 rows | {grouped * 1000:.1f} | 1.00x |",
        f"| peft's per-row adapter_names, 1 forward | {ways['peft'] * 1000:.1f} "
        f"| {grouped / ways['peft']:.2f}x |",
        f"| gathered: 1 forward, each row's A and B, two bmm | {ways['gathered'] * 1000:.1f} "
        f"| {grouped / ways['gathered']:.2f}x |",
        f"| stacked (qatune): 1 forward, every adapter's columns, masked | "
        f"{ways['stacked'] * 1000:.1f} | {grouped / ways['stacked']:.2f}x |",
        "",
    ]

    def switching() -> float:
        started = time.perf_counter()
        for _ in range(20):
            baseline_model.set_adapter("a1")
            baseline_model.set_adapter("a0")
        return (time.perf_counter() - started) / 40

    switch = engine.call(switching)
    adapter_bytes = (adapters[0].directory / "adapter_model.safetensors").stat().st_size
    weights = sum(p.numel() * p.element_size() for p in engine.model.parameters())
    bandwidth = engine.call(bandwidth_gbs)
    bound = bandwidth * 1e9 / weights
    lines += [
        f"- adapter: {adapter_bytes / 2**20:.2f} MB of weights each; first load (peft wraps the "
        f"model) {first_load * 1000:.0f} ms, later loads median "
        f"{statistics.median(load_times) * 1000:.0f} ms, RSS +{rss_after - rss_before:.0f} MB "
        f"for the first; switching the active adapter {switch * 1000:.2f} ms",
        f"- bound: {weights / 2**20:,.0f} MB of weights read per decode step, bandwidth "
        f"{bandwidth:.1f} GB/s (copy): at most {bound:,.0f} tokens/s for one request; the "
        f"engine alone reaches {tokens / single / bound:.0%} of that",
        "",
    ]
    engine.close()
    ratios = {
        f"{shape} one request (engine / raw generate)": raw / single,
        f"{shape} 8 concurrent over 4 adapters (engine / one at a time)": sequential / wall,
        f"{shape} decode step, 8 rows over 4 adapters (stacked / grouped)": grouped
        / ways["stacked"],
    }
    return lines, ratios


def main() -> None:
    from bench import serve_backends  # (it imports this module: not at the top)

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=[*SHAPES, "all"], default="all")
    parser.add_argument("--tokens", type=int, default=None, help="new tokens per request")
    parser.add_argument(
        "--against",
        choices=["generate", "vllm"],
        default="generate",
        help="the baseline: one-at-a-time `generate` (above), or vLLM (bench/serve_backends.py)",
    )
    parser.add_argument("--vllm-python", type=Path, default=serve_backends.VLLM_PYTHON)
    args = parser.parse_args()
    command = "python -m bench.serve_throughput " + " ".join(sys.argv[1:])
    if args.against == "vllm":
        serve_backends.compare(args.shape, args.vllm_python, command.strip(), args.tokens)
        return
    shapes = list(SHAPES) if args.shape == "all" else [args.shape]
    ratios: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for shape in shapes:
            tokens = args.tokens or {"tiny": 128, REAL: 64}.get(shape, 32)
            lines, shape_ratios = bench_shape(shape, tokens, Path(scratch))
            ratios |= shape_ratios
            print("\n".join(lines), flush=True)
    print(f"Ratios recorded in {record('serve_throughput', ratios, command.strip())}")


if __name__ == "__main__":
    main()
