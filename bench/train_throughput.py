"""Training throughput, side by side: the seeds' recipe, a careful HF Trainer recipe, qatune.

    python -m bench.train_throughput [--shape small|qwen2.5-0.5b|smollm2-135m-instruct|all]
                                     [--examples N] [--epochs E] [--rounds K]
                                     [--system-prompt TEXT]
    python -m bench.train_throughput --careful-search [--shape small] [--rounds K]

One run makes a random-initialised Qwen2-architecture model of the chosen shape and a QA
set with a realistic length spread (or, for smollm2-135m-instruct, takes the real model,
bench/real_model.py, and the 55 pairs of bench/data's FAQs), then trains the same examples
three ways, each in a child process of its own (so that its peak RSS is its own):

  seeds    pad every example to max_length=256, fp32, micro-batch 1 × 8 accumulation,
           gradient checkpointing (as the field notes do)
  careful  HF Trainer + peft as a careful user writes it: dynamic padding, group_by_length,
           answer-only loss, bf16, batch 8, no checkpointing; its knobs (CAREFUL) are the
           fastest set `--careful-search` found among CAREFUL_TRIALS
  qatune   `qatune train --batch-size 8` (the service's ModelTrainer)

All: LoRA r=8, alpha=16 on all linear layers, lr 2e-4 with linear decay and no warm-up,
8 examples per optimizer step, the same epochs. The headline is whole-job real tokens/s:
the examples' own tokens over the training loop's wall time, first steps included
(`trainer.train()` for HF, qatune's loop); beside it the steady state (after the first
WARM_UP_STEPS), computed tokens/s (run through the model: padding included, a prefix
shared by a micro-batch's examples once), wall time, peak RSS, mean and final loss, the
ratios, and model FLOP utilisation against a bf16 matmul measured on this machine.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.peak import run_measured
from bench.real_model import REAL, faq_pairs, real_model_dir, real_shape
from bench.results import record

ROOT = Path(__file__).resolve().parents[1]
SHAPES: dict[str, dict[str, Any]] = {
    # ~23M parameters: a small Qwen2-shaped model, where per-op overhead shows
    "small": {
        "hidden_size": 384,
        "intermediate_size": 1024,
        "num_hidden_layers": 6,
        "num_attention_heads": 6,
        "num_key_value_heads": 2,
        "vocab_size": 32000,
    },
    # Qwen2.5-0.5B's exact shape, with its real 151,936-token vocabulary
    "qwen2.5-0.5b": {
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
    },
}
LORA_R, LORA_ALPHA, LR, BATCH = 8, 16, 2e-4, 8


@dataclass(frozen=True)
class CarefulKnobs:
    """What a careful HF Trainer user might set; `--careful-search` tries each set."""

    bf16_weights: bool = False  # load the model in bf16 (else fp32 weights, bf16 autocast)
    flatten: bool = False  # DataCollatorWithFlattening: one row per batch, no padding
    group_by_length: bool = True
    compile: bool = False  # TrainingArguments(torch_compile=True)
    fused_adamw: bool = False  # optim="adamw_torch_fused" (one kernel for all LoRA tensors)
    mixed_bf16: bool = True  # TrainingArguments(bf16=True); off: fp32 throughout


CAREFUL_TRIALS: dict[str, CarefulKnobs] = {
    "fp32 weights, bf16 autocast": CarefulKnobs(),
    "bf16 weights": CarefulKnobs(bf16_weights=True),
    "bf16 weights, flattened": CarefulKnobs(bf16_weights=True, flatten=True),
    "bf16 weights, flattened, fused AdamW": CarefulKnobs(
        bf16_weights=True, flatten=True, fused_adamw=True
    ),
    "bf16 weights, random order": CarefulKnobs(bf16_weights=True, group_by_length=False),
    "bf16 weights, torch.compile": CarefulKnobs(bf16_weights=True, compile=True),
}
WORDS = (
    "model adapter training memory device question answer token batch service job precision "
    "layer gradient optimizer dataset the a of to in is and for with on"
).split()
HANZI = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经"  # noqa: E501


# ----------------------------------------------------------------------------- inputs
def make_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """Short questions and answers of widely varying length, a quarter of them Chinese."""
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        chinese = i % 4 == 0
        q_len = int(rng.lognormvariate(2.3, 0.4))
        a_len = int(min(180, rng.lognormvariate(3.4, 0.7)))
        if chinese:
            q = "".join(rng.choice(HANZI) for _ in range(q_len)) + "？"
            a = "".join(rng.choice(HANZI) for _ in range(max(2, a_len // 3))) + "。"
        else:
            q = " ".join(rng.choice(WORDS) for _ in range(max(2, q_len // 5))).capitalize() + "?"
            a = " ".join(rng.choice(WORDS) for _ in range(max(2, a_len // 5))).capitalize() + "."
        pairs.append((q, a))
    return pairs


def make_model(
    shape: str,
    directory: Path,
    spec: dict[str, Any] | None = None,
    system_prompt: str | None = None,
    dtype: str = "float32",
    device: str = "cpu",
) -> Path:
    """A random-initialised Qwen2 of the shape, with the built-in byte tokenizer, stored in
    `dtype` (Qwen2.5's own checkpoints are bfloat16); with a system prompt, its chat
    template puts it in every example (as Qwen2.5's does)."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from app.ml.builtin import CHAT_TEMPLATE, ensure_builtin_model

    tokenizer = AutoTokenizer.from_pretrained(ensure_builtin_model(directory / "builtin"))
    if system_prompt:
        if set("{}%'\"") & set(system_prompt):
            raise SystemExit("--system-prompt: plain text only (no braces, % or quotes)")
        tokenizer.chat_template = f"<|im_start|>system\n{system_prompt}<|im_end|>\n" + CHAT_TEMPLATE
    model_dir = directory / shape
    config = Qwen2Config(
        **{"max_position_embeddings": 4096, "tie_word_embeddings": True, **(spec or SHAPES[shape])},
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))  # made in the dtype it is stored in
    try:
        with torch.device(device):  # on a GPU: seconds, where a 7B shape takes minutes on a CPU
            Qwen2ForCausalLM(config).save_pretrained(model_dir, safe_serialization=True)
    finally:
        torch.set_default_dtype(default)
    tokenizer.save_pretrained(model_dir)
    return model_dir


def peak_flops() -> dict[str, float]:
    """Large matmuls in bf16 and fp32: the machine's practical limits, in GFLOP/s; without
    native bf16 (minutes of emulated matmuls) the MFU is against the fp32 peak."""
    import torch

    result = {}
    dtypes = (("bf16", torch.bfloat16), ("fp32", torch.float32))
    for name, dtype in dtypes if native_bf16() else dtypes[1:]:
        a = torch.randn(2048, 2048, dtype=dtype)
        b = torch.randn(2048, 2048, dtype=dtype)
        a @ b
        best = float("inf")
        for _ in range(5):
            started = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - started)
        result[name] = 2 * 2048**3 / best / 1e9
    result["mfu"] = result.get("bf16", result["fp32"])
    return result


def flops_per_token(shape: dict[str, Any], mean_len: float, answer_fraction: float) -> float:
    """LoRA training: forward 2N, backward ~2N (input gradients only; frozen weights need no
    weight gradients), plus attention, plus the LM head at the trained positions."""
    h, i, layers = shape["hidden_size"], shape["intermediate_size"], shape["num_hidden_layers"]
    kv = shape["num_key_value_heads"] * h // shape["num_attention_heads"]
    block = layers * (2 * h * h + 2 * h * kv + 3 * h * i)
    attention = layers * 2 * 2 * h * mean_len / 2  # QK and AV, causal half
    head = shape["vocab_size"] * h * answer_fraction
    return 4 * (block + attention + head)


# ----------------------------------------------------------------------------- recipes
def run_hf_recipe(
    recipe: str, model_dir: Path, data: Path, out: Path, knobs: CarefulKnobs, epochs: int
) -> dict[str, Any]:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        DataCollatorForSeq2Seq,
        DataCollatorWithFlattening,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    from app.ml.data import encode_pair
    from app.ml.pairs import QAPair
    from app.ml.training.loop import WARM_UP_STEPS

    torch.set_num_threads(os.cpu_count() or 1)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    pairs = [json.loads(line) for line in data.read_text().splitlines()]
    rows = []
    for pair in pairs:
        # the same tokens as qatune
        example = encode_pair(tokenizer, QAPair(pair["question"], pair["answer"]))
        labels = [-100] * example.prompt_len + example.input_ids[example.prompt_len :]
        rows.append(
            {
                "input_ids": example.input_ids,
                "labels": labels,
                "attention_mask": [1] * example.num_tokens,
            }
        )
    seeds = recipe == "seeds"
    if seeds:  # pad (and cut) every example to 256 tokens, as the field notes do
        for row in rows:
            pad = 256 - len(row["input_ids"])
            row["input_ids"] = (row["input_ids"] + [tokenizer.pad_token_id] * pad)[:256]
            row["labels"] = (row["labels"] + [-100] * pad)[:256]
            row["attention_mask"] = (row["attention_mask"] + [0] * pad)[:256]

    class Rows(torch.utils.data.Dataset[dict[str, list[int]]]):
        def __len__(self) -> int:
            return len(rows)

        def __getitem__(self, index: int) -> dict[str, list[int]]:
            return rows[index]

    weights = torch.bfloat16 if knobs.bf16_weights and not seeds else torch.float32
    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=weights)
    model = get_peft_model(
        base,
        LoraConfig(
            r=LORA_R,
            lora_alpha=LORA_ALPHA,
            lora_dropout=0.0,
            target_modules="all-linear",
            task_type="CAUSAL_LM",
        ),
    )
    args = TrainingArguments(
        output_dir=str(out),
        num_train_epochs=epochs,
        learning_rate=LR,
        lr_scheduler_type="linear",
        warmup_steps=0,
        weight_decay=0.0,
        per_device_train_batch_size=1 if seeds else BATCH,
        gradient_accumulation_steps=BATCH if seeds else 1,
        bf16=knobs.mixed_bf16 and not seeds,
        # The field notes' recipe also checkpoints activations (seeds 000 and 004).
        gradient_checkpointing=seeds,
        gradient_checkpointing_kwargs={"use_reentrant": False} if seeds else None,
        use_cpu=True,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        dataloader_pin_memory=False,
        seed=42,
        train_sampling_strategy="group_by_length"
        if knobs.group_by_length and not seeds
        else "random",
        torch_compile=knobs.compile and not seeds,
        optim="adamw_torch_fused" if knobs.fused_adamw and not seeds else "adamw_torch",
        remove_unused_columns=False,
        disable_tqdm=True,
    )
    flatten = knobs.flatten and not seeds
    collate = (
        DataCollatorWithFlattening() if flatten else DataCollatorForSeq2Seq(tokenizer, padding=True)
    )
    batch_tokens: list[int] = []  # real tokens of each batch, in order (loaded in-process)
    computed = [0]  # tokens the model ran on: padding included

    def counting_collator(features: list[dict[str, list[int]]]) -> Any:
        batch_tokens.append(sum(sum(f["attention_mask"]) for f in features))
        batch = collate(features)
        computed[0] += batch["input_ids"].numel()
        return batch

    class SteadyClock(TrainerCallback):
        """Time and tokens once the first WARM_UP_STEPS are done (as qatune's loop)."""

        warm: float | None = None

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step == WARM_UP_STEPS:
                SteadyClock.warm = time.perf_counter()

    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=Rows(),
        data_collator=counting_collator,
        callbacks=[SteadyClock()],
    )
    started = time.perf_counter()
    result = trainer.train()
    ended = time.perf_counter()
    elapsed = ended - started
    steady = None
    warm_batches = WARM_UP_STEPS * args.gradient_accumulation_steps  # steps, not batches
    if SteadyClock.warm is not None and len(batch_tokens) > warm_batches:
        steady = sum(batch_tokens[warm_batches:]) / (ended - SteadyClock.warm)
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    return {
        "train_tokens": sum(batch_tokens),
        "computed_tokens": computed[0],
        "train_runtime_s": elapsed,
        "steady_tokens_per_second": steady,
        "train_loss": result.training_loss,
        "final_loss": losses[-1] if losses else None,
    }


def qatune_train_command(model_dir: Path, data: Path, output: Path, **options: Any) -> list[str]:
    """`qatune train` with options given as keywords (batch_size=8 → --batch-size 8)."""
    command = [
        sys.executable,
        "-m",
        "app.cli",
        "train",
        "--base-model",
        str(model_dir),
        "--data",
        str(data),
        "--output",
        str(output),
    ]
    for name, value in options.items():
        command += [f"--{name.replace('_', '-')}", str(value)]
    return command


@dataclass(frozen=True)
class Recipe:
    """One way to train: seeds, careful (with its knobs) or qatune."""

    kind: str
    knobs: CarefulKnobs = CarefulKnobs()


# The careful anchor: the fastest whole-job set of `--careful-search` (docs/benchmarks.md);
# on a CPU without native bf16 (emulated: ~1 GFLOP/s), the same in fp32, as a careful
# user (and qatune's device plan) would train there.
CAREFUL = CarefulKnobs(bf16_weights=True, flatten=True)
CAREFUL_FP32 = CarefulKnobs(flatten=True, mixed_bf16=False)


def native_bf16() -> bool:
    from app.ml.device import plan_device, probe_capabilities

    return plan_device(probe_capabilities(), "cpu").precision == "bf16"


RECIPES = {
    "seeds": Recipe("seeds"),
    "careful": Recipe("careful", CAREFUL),
    "qatune": Recipe("qatune"),
}


def run_child(
    recipe: Recipe, model_dir: Path, data: Path, scratch: Path, epochs: int
) -> dict[str, Any]:
    """Run one recipe in its own process; its own peak RSS (bench/peak.py)."""
    metrics_file = scratch / f"{recipe.kind}.json"
    if recipe.kind == "qatune":
        command = qatune_train_command(
            model_dir,
            data,
            scratch / "qatune-adapter",
            epochs=epochs,
            batch_size=BATCH,
            learning_rate=LR,
            lora_rank=LORA_R,
            lora_alpha=LORA_ALPHA,
            lora_dropout=0.0,  # as the HF recipes below
            lora_target_modules="all-linear",
            max_seq_length=4096,
            validation_split=0,
            metrics_json=metrics_file,
        )
    else:
        command = [
            sys.executable,
            "-m",
            "bench.train_throughput",
            "--child",
            recipe.kind,
            "--knobs",
            json.dumps(asdict(recipe.knobs)),
            "--epochs",
            str(epochs),
            "--model-dir",
            str(model_dir),
            "--data",
            str(data),
            "--out",
            str(metrics_file),
        ]
    env = {
        **os.environ,
        "QATUNE_DATA_DIR": str(scratch / "qatune-data"),
        "QATUNE_LOG_DIR": str(scratch / "logs"),
        "QATUNE_OFFLINE": "true",
    }
    started_epoch = time.time()
    log = scratch / f"{recipe.kind}.log"
    with open(log, "w") as stderr:
        status, wall, peak_gb = run_measured(
            command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr
        )
    if status != 0:
        raise RuntimeError(f"{recipe.kind} failed: {log.read_text()[-3000:]}")
    metrics: dict[str, Any] = json.loads(metrics_file.read_text())
    metrics["wall_s"] = wall
    metrics["peak_rss_mb"] = peak_gb * 1024
    if recipe.kind == "qatune":
        metrics["phases_s"] = qatune_phases(log.read_text(), started_epoch, metrics["wall_s"])
    return metrics


# ----------------------------------------------------------------------------- report
def speed(metrics: dict[str, Any]) -> float:
    """Whole-job real tokens/s: the training loop's wall time, first steps included."""
    return float(metrics["train_tokens"] / metrics["train_runtime_s"])


def end_to_end(metrics: dict[str, Any]) -> float:
    """Real tokens over the whole process: start to adapter saved (and, for qatune,
    evaluated: its answer table), what a user waits for."""
    return float(metrics["train_tokens"] / metrics["wall_s"])


# qatune's phases, each with the log line that ends it (the last runs to the exit)
PHASES = {
    "start-up (imports, device probe)": "Memory before the job",
    "tokenizing, planning, loading the model": "Training ",
    "training loop": "Answer table: asking",
    "answer table": "Answer table: ",
    "saving the adapter, cleanup, exit": None,
}


def qatune_phases(log: str, started: float, wall_s: float) -> dict[str, float]:
    """Seconds of each phase of a `qatune train` process, from its log's timestamps."""
    marks = [mark for mark in PHASES.values() if mark]
    stamps: list[float] = []
    for line in log.splitlines():
        if len(stamps) < len(marks) and f"- {marks[len(stamps)]}" in line:
            when = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S.%f")  # local time
            stamps.append(when.timestamp())
    if len(stamps) < len(marks):
        return {}
    bounds = [started, *stamps, started + wall_s]
    return {name: bounds[i + 1] - bounds[i] for i, name in enumerate(PHASES)}


def bench_shape(
    shape: str,
    examples: int,
    epochs: int,
    peaks: dict[str, float],
    rounds: int,
    system_prompt: str | None,
    recipes: dict[str, Recipe],
) -> tuple[list[str], dict[str, float]]:
    """The shape's table, and qatune's ratios over the other recipes (loop, end to end)."""
    with tempfile.TemporaryDirectory(prefix="qatune-bench-") as tmp:
        scratch = Path(tmp)
        if shape == REAL:  # its own weights and chat template, on a FAQ written for it
            model_dir, pairs = real_model_dir(), faq_pairs()[:examples]
            dims = real_shape(model_dir)
        else:
            model_dir = make_model(shape, scratch, system_prompt=system_prompt)
            pairs, dims = make_pairs(examples), SHAPES[shape]
        data = scratch / "qa.jsonl"
        data.write_text(
            "".join(
                json.dumps({"question": q, "answer": a}, ensure_ascii=False) + "\n"
                for q, a in pairs
            )
        )
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in recipes}
        for round_ in range(rounds):  # interleaved, so that drift in the machine hits all
            for name, recipe in recipes.items():
                print(f"  {shape}: {name} (round {round_ + 1}) …", file=sys.stderr, flush=True)
                runs[name].append(run_child(recipe, model_dir, data, scratch, epochs))
        # Each recipe's median run by real tokens/s (the machine is shared and noisy).
        results = {r: sorted(done, key=speed)[len(done) // 2] for r, done in runs.items()}
        from transformers import AutoTokenizer

        from app.ml.data import encode_pair
        from app.ml.pairs import QAPair

        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        encoded = [encode_pair(tokenizer, QAPair(q, a)) for q, a in pairs]
        mean_len = sum(e.num_tokens for e in encoded) / len(encoded)
        total_tokens = sum(e.num_tokens for e in encoded)
        answer_fraction = sum(e.answer_tokens for e in encoded) / total_tokens
    # The peak again after the runs: a busy minute at the start must not inflate the MFU.
    again = peak_flops()
    peaks = {name: max(value, again[name]) for name, value in peaks.items()}
    per_token = flops_per_token(dims, mean_len, answer_fraction)
    lines = [
        f"### {shape} ({examples} examples × {epochs} epoch{'s' if epochs > 1 else ''}, "
        f"mean {mean_len:.0f} tokens, {answer_fraction:.0%} of them answer tokens"
        + (f", system prompt {system_prompt!r}" if system_prompt else "")
        + ")",
        "",
        "| recipe | end to end tok/s | end to end vs careful | real tok/s (loop) | steady tok/s "
        "| computed tok/s | loop s | wall s | peak RSS MB | mean loss | final loss | loop vs "
        f"careful | loop vs seeds | MFU ({'bf16' if 'bf16' in peaks else 'fp32'} peak) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: |",
    ]
    anchor = results.get("careful", next(iter(results.values())))
    seeds = results.get("seeds")
    for name, m in results.items():
        real = speed(m)
        steady = m.get("steady_tokens_per_second")
        padded = m["computed_tokens"] / m["train_runtime_s"]
        mfu = real * per_token / (peaks["mfu"] * 1e9)
        whole = end_to_end(m)
        lines.append(
            f"| {name} | {whole:,.1f} | {whole / end_to_end(anchor):.2f}x | {real:,.0f} | "
            f"{f'{steady:,.0f}' if steady else '–'} | {padded:,.0f} | "
            f"{m['train_runtime_s']:.1f} | {m['wall_s']:.1f} | {m['peak_rss_mb']:,.0f} | "
            f"{m['train_loss']:.4f} | {m['final_loss']:.4f} | {real / speed(anchor):.2f}x | "
            f"{f'{real / speed(seeds):.1f}x' if seeds else '–'} | {mfu:.1%} |"
        )
    notes = []
    for i, run in enumerate(runs.get("qatune", [])):
        if phases := run.get("phases_s"):
            notes.append(
                f"qatune's process, round {i + 1}: "
                + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in phases.items())
                + "."
            )
    if "qatune" in results and "careful" in results:
        q, careful = results["qatune"], results["careful"]
        notes.append(
            f"qatune mean loss vs careful: {q['train_loss'] / careful['train_loss'] - 1:+.2%}; "
            f"peak RSS vs careful: {q['peak_rss_mb'] / careful['peak_rss_mb']:.2f}x."
        )
    notes.append(
        f"Model FLOPs per real token ≈ {per_token / 1e6:,.1f} MFLOP; MFU against "
        f"{'bf16' if 'bf16' in peaks else 'fp32 (no native bf16)'} "
        f"{peaks['mfu']:,.0f} GFLOP/s (the best of before and after the runs)."
    )
    if rounds > 1:
        notes.append(
            f"Whole-job real tok/s in each of {rounds} rounds (the table shows each recipe's "
            "median): "
            + "; ".join(
                f"{r} " + ", ".join(f"{speed(m):,.0f}" for m in done) for r, done in runs.items()
            )
            + "; end to end: "
            + "; ".join(
                f"{r} " + ", ".join(f"{end_to_end(m):,.1f}" for m in done)
                for r, done in runs.items()
            )
            + "."
        )
    ratios: dict[str, float] = {}
    if "qatune" in results:
        job = f"{shape} {examples}x{epochs}"
        for other in (name for name in results if name != "qatune"):
            q, o = results["qatune"], results[other]
            ratios[f"{job} loop (qatune / {other})"] = speed(q) / speed(o)
            ratios[f"{job} end to end (qatune / {other})"] = end_to_end(q) / end_to_end(o)
    return [*lines, "", " ".join(notes), ""], ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=[*SHAPES, REAL, "all"], default="all")
    parser.add_argument(
        "--examples",
        type=int,
        default=None,
        help="QA pairs per shape (default: 128 small, 32 for 0.5B)",
    )
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument(
        "--rounds", type=int, default=1, help="run every recipe this often; report the median"
    )
    parser.add_argument(
        "--system-prompt",
        help="a system prompt in every example (Qwen2.5's template adds one): a shared prefix",
    )
    parser.add_argument(
        "--recipes",
        default=",".join(RECIPES),
        help="the recipes to run, comma-separated (default: all three)",
    )
    parser.add_argument(
        "--careful-search",
        action="store_true",
        help="try every careful HF knob set (CAREFUL_TRIALS) instead of the three recipes",
    )
    parser.add_argument("--child", choices=["seeds", "careful"], help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--knobs", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        knobs = CarefulKnobs(**json.loads(args.knobs))
        metrics = run_hf_recipe(
            args.child, args.model_dir, args.data, args.out.parent / "hf", knobs, args.epochs
        )
        args.out.write_text(json.dumps(metrics))
        return
    recipes = (
        {name: Recipe("careful", knobs) for name, knobs in CAREFUL_TRIALS.items()}
        if args.careful_search
        else {name: RECIPES[name] for name in args.recipes.split(",")}
    )
    if not args.careful_search and "careful" in recipes and not native_bf16():
        recipes["careful"] = Recipe("careful", CAREFUL_FP32)
        print("No native bf16 on this CPU: the careful recipe trains in fp32, as qatune does.")
    peaks = peak_flops()
    bf16 = f"bf16 {peaks['bf16']:,.0f} GFLOP/s" if "bf16" in peaks else "no native bf16"
    print(f"Measured peak: {bf16}, fp32 {peaks['fp32']:,.0f} GFLOP/s ({os.cpu_count()} cores)\n")
    shapes = [*SHAPES, REAL] if args.shape == "all" else [args.shape]
    ratios: dict[str, float] = {}
    for shape in shapes:
        examples = args.examples or {"small": 128, REAL: len(faq_pairs())}.get(shape, 32)
        lines, shape_ratios = bench_shape(
            shape, examples, args.epochs, peaks, args.rounds, args.system_prompt, recipes
        )
        ratios |= shape_ratios
        print("\n".join(lines), flush=True)
    if ratios:
        command = "python -m bench.train_throughput " + " ".join(sys.argv[1:])
        print(f"Ratios recorded in {record('train_throughput', ratios, command.strip())}")


if __name__ == "__main__":
    main()
