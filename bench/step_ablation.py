"""What each of qatune's training speed-ups is worth, measured on the same steps.

    python -m bench.step_ablation [--shape small|qwen2.5-0.5b] [--examples N] [--rounds K]

Loads a bench model (bench.train_throughput's shapes and data) the way ModelTrainer does,
then runs the same optimizer steps (8 examples each, LoRA r=8) with one speed-up switched
off at a time, taking turns step by step in one process so that the machine's drift hits
every variant alike. Prints each variant's median real tokens/s and its ratio to qatune's
full path. The kept heap is compared in blocks of steps instead: one step with glibc's
default thresholds between kept ones still finds the heap grown and barely faults.
"""

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from bench.train_throughput import SHAPES, make_model, make_pairs

LORA = {"lora_r": 8, "lora_alpha": 16, "lora_dropout": 0.0, "lora_target_modules": "all-linear"}
VARIANTS = (
    "qatune",
    "unfused LoRA (peft's forward)",
    "unfused head + loss (fp32 logits)",
    "flash attention for short examples",
    "masked rows instead of flat rows",
    "shared prefix once → in every example",
    "none of the above",
)


@contextmanager
def switched_off(variant: str, model: Any, trainer: Any) -> Iterator[None]:
    from app.ml import answer_loss, data, varlen_attention

    off = set(VARIANTS[1:-1]) if variant == VARIANTS[-1] else {variant}
    saved = (
        answer_loss.linear_cross_entropy_sum,
        varlen_attention.CPU_MATH_BELOW_TOKENS,
        trainer.flat,
        data.shared_prefix_len,
    )
    lora = [m for m in model.modules() if "_unfused_forward" in m.__dict__]
    if VARIANTS[1] in off:
        for module in lora:
            object.__setattr__(module, "forward_fused", module.forward)
            object.__setattr__(module, "forward", module._unfused_forward)
    if VARIANTS[2] in off:
        answer_loss.linear_cross_entropy_sum = unfused_loss
    if VARIANTS[3] in off:
        varlen_attention.CPU_MATH_BELOW_TOKENS = 0
    if VARIANTS[4] in off:
        trainer.flat = False
    if VARIANTS[5] in off:
        data.shared_prefix_len = lambda examples: 0
    try:
        yield
    finally:
        (
            answer_loss.linear_cross_entropy_sum,
            varlen_attention.CPU_MATH_BELOW_TOKENS,
            trainer.flat,
            data.shared_prefix_len,
        ) = saved
        for module in lora:
            if "forward_fused" in module.__dict__:
                object.__setattr__(module, "forward", module.forward_fused)
                del module.__dict__["forward_fused"]


def _shape(model: Any) -> Any:
    from app.ml.shapes import ModelShape

    return ModelShape.from_config(model.get_base_model().config.to_dict())


def unfused_loss(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    hits: torch.Tensor | None = None,
) -> torch.Tensor:
    logits = torch.nn.functional.linear(hidden, weight).float()
    if hits is not None:
        hits[:] = logits.argmax(dim=-1) == targets
    return torch.nn.functional.cross_entropy(logits, targets, reduction="sum")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=list(SHAPES), default="small")
    parser.add_argument("--examples", type=int, default=None, help="default: 96 small, 32 0.5B")
    parser.add_argument("--rounds", type=int, default=2, help="passes over the steps")
    parser.add_argument(
        "--profile", action="store_true", help="also print where qatune's step spends its time"
    )
    args = parser.parse_args()

    from transformers import AutoTokenizer

    from app.ml.data import encode_pairs
    from app.ml.device import plan_device, probe_capabilities
    from app.ml.hyperparameters import DataFacts, HyperparameterRequest, resolve
    from app.ml.memory import heap_kept_between_steps
    from app.ml.models import Recommended
    from app.ml.pairs import QAPair
    from app.ml.planner import plan_memory
    from app.ml.training.loop import TrainingLoop
    from app.ml.training.model_setup import load_trainable_model

    examples_count = args.examples or (96 if args.shape == "small" else 32)
    with tempfile.TemporaryDirectory(prefix="qatune-ablation-") as tmp:
        model_dir = make_model(args.shape, Path(tmp))
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        pairs = [QAPair(q, a) for q, a in make_pairs(examples_count)]
        examples, _ = encode_pairs(tokenizer, pairs, 4096)
        device_plan = plan_device(probe_capabilities(), "cpu")
        torch.set_num_threads(device_plan.capabilities.cpu_count)
        precision = device_plan.precision_for("auto")
        params = resolve(
            HyperparameterRequest.model_validate({**LORA, "batch_size": 8}),
            data=DataFacts(lengths=tuple(e.num_tokens for e in examples)),
            max_positions=4096,
            recommended=Recommended(),
        )
        trainable = load_trainable_model(
            model_dir, device="cpu", precision=precision.precision, params=params, emit=print
        )
    model = trainable.model
    plan = plan_memory(  # every step in one micro-batch, as the trainer plans it here
        shape=_shape(model),
        precision=precision.precision,
        lora_r=8,
        lengths=[e.num_tokens for e in examples],
        batch_size=8,
        micro_batch_size=None,
        device="cpu",
        budget_gb=device_plan.memory_budget_gb,
        budget_reason=device_plan.budget_reason.english(),
    )
    trainer = TrainingLoop(
        model,
        tokenizer,
        examples,
        params=params,
        plan=plan,
        device="cpu",
        precision=precision,
        flat=trainable.flat,
        emit=lambda event: None,
        should_stop=lambda: None,
    )
    random.Random(0).shuffle(examples)
    steps = [examples[i : i + 8] for i in range(0, len(examples), 8)]

    def step(group: list[Any]) -> int:  # the trainer's own optimizer step
        _, real_tokens, _ = trainer.optimizer_step(group)
        return real_tokens

    model.train()
    speeds: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with heap_kept_between_steps():  # as ModelTrainer trains
        for variant in VARIANTS:  # warm-up: first-call costs out of the figures
            with switched_off(variant, model, trainer):
                step(steps[0])
        for _ in range(args.rounds):
            for group in steps[1:]:
                for variant in VARIANTS:
                    with switched_off(variant, model, trainer):
                        started = time.perf_counter()
                        tokens = step(group)
                        speeds[variant].append(tokens / (time.perf_counter() - started))
    heap = heap_blocks(step, steps, args.rounds)
    base = speeds["qatune"]
    print(
        f"### {args.shape}: {len(steps) - 1} steps x {args.rounds} rounds, 8 examples a step, "
        f"{precision.precision}\n\n| variant | median real tok/s | vs qatune (median of per-step "
        "ratios) |\n| --- | ---: | ---: |"
    )
    for variant, values in speeds.items():
        ratio = statistics.median(v / b for v, b in zip(values, base, strict=True))
        print(f"| {variant} | {statistics.median(values):,.0f} | {ratio:.2f}x |")
    ratio = statistics.median(d / k for k, d in zip(heap["kept"], heap["default"], strict=True))
    print(
        f"| glibc's default heap thresholds (in blocks of steps) | "
        f"{statistics.median(heap['default']):,.0f} | {ratio:.2f}x (kept in the same blocks: "
        f"{statistics.median(heap['kept']):,.0f}) |"
    )
    if args.profile:
        with heap_kept_between_steps():
            step(steps[0])
            print_profile(lambda: [step(group) for group in steps[1:5]])


def heap_blocks(
    step: Callable[[Any], int], steps: list[Any], rounds: int
) -> dict[str, list[float]]:
    """qatune's steps with the heap kept and with glibc's defaults, a block of each in turn.

    Each block starts from a trimmed heap, as a fresh process does, after one untimed step.
    """
    from app.ml.memory import _keep_freed_memory, _malloc_trim

    speeds: dict[str, list[float]] = {"default": [], "kept": []}
    for _ in range(rounds):
        for name in speeds:
            _keep_freed_memory(name == "kept")
            _malloc_trim()
            step(steps[0])
            for group in steps[1:]:
                started = time.perf_counter()
                tokens = step(group)
                speeds[name].append(tokens / (time.perf_counter() - started))
    _keep_freed_memory(False)
    _malloc_trim()
    return speeds


def print_profile(run: Callable[[], object]) -> None:
    """Self time of the ops of a few qatune steps, grouped as docs/benchmarks.md shows them."""
    from torch.profiler import profile

    with profile() as prof:
        started = time.perf_counter()
        run()
        wall = time.perf_counter() - started
    groups = {
        "matmuls (mm, addmm, bmm)": ("aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm"),
        "softmax (loss and attention)": ("aten::_softmax",),
        "flash attention (long examples)": ("aten::_scaled_dot_product_flash_attention",),
    }
    totals = dict.fromkeys(groups, 0.0)
    everything = 0.0
    for event in prof.key_averages():
        everything += event.self_cpu_time_total
        for group, prefixes in groups.items():
            if event.key.startswith(prefixes):
                totals[group] += event.self_cpu_time_total
    print(f"\nProfile of {wall:.2f} s wall time (ops' self time; the rest is Python):\n")
    print("| share of wall time | |\n| --- | ---: |")
    for group, total in totals.items():
        print(f"| {group} | {total / 1e6 / wall:.0%} |")
    print(
        f"| other ops (elementwise, copies, optimizer) | "
        f"{(everything - sum(totals.values())) / 1e6 / wall:.0%} |"
    )
    print(f"| outside ops (Python, autograd engine) | {1 - everything / 1e6 / wall:.0%} |")
    top = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)[:10]
    print(
        "\nTop ops by self time: "
        + ", ".join(f"{e.key} {e.self_cpu_time_total / 1e6 / wall:.1%}" for e in top)
    )


if __name__ == "__main__":
    main()
