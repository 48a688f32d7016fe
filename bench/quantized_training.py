"""A quantized base (QLoRA) against the base as stored, side by side in one run.

    python -m bench.quantized_training [--shapes qwen2.5-0.5b qwen2.5-3b] [--steps 4]
        [--kinds none 8bit 4bit] [--checkpointing] [--no-quality] [--on-gpu]

Memory and speed: for each shape, a random-initialised Qwen2 model (bench.train_throughput's
`make_model`), then `qatune train` for the same steps on the same 16 pairs with the base
as stored (`none`: the device's training precision), `8bit` and `4bit`, each in its own
process: the planner's estimate, its own peak RSS (bench/peak.py), the whole job's tokens/s (process
start to adapter saved and its answer table done), the loop's, and the losses after the
same steps. With --on-gpu (CUDA), each job in this process instead, its peak the CUDA
allocator's, the base stored in bfloat16 as Qwen2.5's own checkpoints are.

Quality: builtin:tiny trained with defaults (auto: until every answer is learned) on a
30-pair FAQ no one tuned for (bench/faq_data.py, mixed English and Chinese) three ways;
the answers on its own (quantized) base, as the job's table and qatune's serving have
them, and on the base as stored, as a merged export has it, greedy.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.faq_data import faq
from bench.peak import run_measured
from bench.planner_accuracy import estimate
from bench.results import record
from bench.train_throughput import ROOT, SHAPES, make_model, make_pairs, qatune_train_command

KINDS = ("none", "8bit", "4bit")
BIG_SHAPES: dict[str, dict[str, Any]] = {
    **SHAPES,
    # Qwen2.5-3B's shape (its real vocabulary), random weights
    "qwen2.5-3b": {
        "hidden_size": 2048,
        "intermediate_size": 11008,
        "num_hidden_layers": 36,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
    },
    # Qwen2.5-7B's shape: its own vocabulary and a separate LM head
    "qwen2.5-7b": {
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
    },
}
PAIRS = 16
BATCH = 8


@dataclass(frozen=True)
class Run:
    estimated_gb: float
    peak_gb: float
    wall_s: float
    metrics: dict[str, Any]

    @property
    def job_tokens_per_s(self) -> float:
        return float(self.metrics["train_tokens"]) / self.wall_s


def _env(scratch: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("QATUNE_")}
    return {
        **keep,
        "QATUNE_DATA_DIR": str(scratch / "data"),
        "QATUNE_LOG_DIR": str(scratch / "logs"),
        "QATUNE_OFFLINE": "true",
    }


def train(command: list[str], scratch: Path) -> tuple[float, float]:
    """Run `qatune train` in a child: (its wall seconds, its own peak RSS in GiB)."""
    log = scratch / "train.log"
    with open(log, "w") as stderr:
        status, wall, peak_gb = run_measured(
            command, cwd=ROOT, env=_env(scratch), stdout=subprocess.DEVNULL, stderr=stderr
        )
    if status != 0:
        raise RuntimeError(f"training failed: {log.read_text()[-3000:]}")
    return wall, peak_gb


def _asked(kind: str, steps: int, checkpointing: bool = False) -> dict[str, Any]:
    return {
        "gradient_checkpointing": True if checkpointing else "auto",
        "quantization": kind,
        "max_steps": steps,
        "batch_size": BATCH,
        "lora_r": 8,
        "validation_split": 0,
        "max_seq_length": 4096,
        "seed": 1,
    }


def bench_shape(
    shape: str, steps: int, tmp: Path, kinds: list[str], checkpointing: bool
) -> dict[str, Run]:
    pairs = make_pairs(PAIRS, seed=3)
    model_dir = make_model(shape, tmp / "models", BIG_SHAPES[shape])
    data = tmp / f"{shape}.jsonl"
    data.write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in pairs))
    runs = {}
    for kind in kinds:
        print(f"  {shape}: {kind} …", file=sys.stderr, flush=True)
        scratch = Path(tempfile.mkdtemp(dir=tmp))
        metrics_file = scratch / "metrics.json"
        asked = _asked(kind, steps, checkpointing)
        command = qatune_train_command(
            model_dir, data, scratch / "adapter", **asked, metrics_json=metrics_file
        )
        wall, peak = train(command, scratch)
        runs[kind] = Run(
            estimate(model_dir, pairs, asked)["estimated_peak_gb"],
            peak,
            wall,
            json.loads(metrics_file.read_text()),
        )
    return runs


def bench_shape_on_gpu(
    shape: str, steps: int, tmp: Path, kinds: list[str], checkpointing: bool
) -> dict[str, Run]:
    """The same runs on a GPU, one after another in this process: the peak is the CUDA
    allocator's for each job (reset as each starts), the base stored in bfloat16 as
    Qwen2.5's checkpoints are. Needs only app.ml's dependencies, not the web service's."""
    import torch
    from loguru import logger

    from app.ml.device import plan_device, probe_capabilities
    from app.ml.events import MemoryReport, Planned, TrainingEvent
    from app.ml.hyperparameters import HyperparameterRequest
    from app.ml.pairs import QAPair
    from app.ml.training.request import TrainingRequest
    from app.ml.training.trainer import ModelTrainer

    device_plan = plan_device(probe_capabilities())
    if device_plan.device != "cuda":
        raise SystemExit("--on-gpu: no CUDA device here (the CPU's peak is the process's RSS)")
    pairs = [QAPair(q, a) for q, a in make_pairs(PAIRS, seed=3)]
    model_dir = make_model(
        shape, tmp / "models", BIG_SHAPES[shape], dtype="bfloat16", device="cuda"
    )
    torch.cuda.empty_cache()
    runs = {}
    for kind in kinds:
        print(f"  {shape}: {kind} …", file=sys.stderr, flush=True)
        seen: dict[str, float] = {}

        def on_event(event: TrainingEvent, seen: dict[str, float] = seen) -> None:
            logger.log(event.level, "{}", event.message.english())
            match event.data:
                case Planned(plan=plan):
                    seen["planned"] = plan.estimated_peak_gb
                case MemoryReport(when="after", memory=memory) if memory.cuda_peak_mb:
                    seen["peak"] = memory.cuda_peak_mb * 2**20 / 1e9

        request = TrainingRequest(
            base_model=str(model_dir),
            pairs=pairs,
            output_dir=Path(tempfile.mkdtemp(dir=tmp)) / "adapter",
            model_cache_dir=tmp / "cache",
            hyperparameters=HyperparameterRequest.model_validate(
                _asked(kind, steps, checkpointing)
            ),
            device_plan=device_plan,
            offline=True,
        )
        started = time.perf_counter()
        result = ModelTrainer(request, on_event=on_event).run()
        wall = time.perf_counter() - started
        runs[kind] = Run(seen["planned"], seen["peak"], wall, result.metrics.as_dict())
        print(
            f"  {shape}: {kind}: planned {seen['planned']:.2f} GB, CUDA peak "
            f"{seen['peak']:.2f} GB, {wall:.0f} s",
            file=sys.stderr,
            flush=True,
        )
    return runs


def served_as_stored(adapter: Path, base: Path, pairs: list[dict[str, str]]) -> int:
    """Exact greedy answers with the adapter on the base as stored: what a merged export
    of an adapter trained on a quantized base answers."""
    from peft import PeftModel

    from app.ml.device import plan_device, probe_capabilities
    from app.ml.models import load_causal_lm, load_tokenizer
    from app.ml.precision import DTYPES
    from bench.reference_answers import exact_count

    precision = plan_device(probe_capabilities(), "cpu").precision
    model = load_causal_lm(base, dtype=DTYPES[precision], device="cpu")
    model = PeftModel.from_pretrained(model, adapter).eval()
    return exact_count(model, load_tokenizer(base), pairs, precision)


def bench_quality(tmp: Path) -> dict[str, dict[str, Any]]:
    from app.ml.builtin import ensure_builtin_model
    from app.ml.training.adapter_files import read_evaluation

    pairs = faq(30, "medium", "mixed", seed=11)
    tmp.mkdir(parents=True, exist_ok=True)
    data = tmp / "faq.jsonl"
    data.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs))
    base = ensure_builtin_model(tmp / "builtin")
    rows = {}
    for kind in KINDS:
        print(f"  builtin:tiny FAQ: {kind} …", file=sys.stderr, flush=True)
        scratch = Path(tempfile.mkdtemp(dir=tmp))
        (scratch / "data").mkdir()
        (scratch / "data" / "models").symlink_to(base.parent)
        command = [
            sys.executable, "-m", "app.cli", "train", "--base-model", "builtin:tiny",
            "--data", str(data), "--output", str(scratch / "adapter"),
            "--quantization", kind, "--metrics-json", str(scratch / "metrics.json"),
        ]  # fmt: skip
        wall, peak = train(command, scratch)
        metrics = json.loads((scratch / "metrics.json").read_text())
        evaluation = read_evaluation(scratch / "adapter")
        rows[kind] = {
            "metrics": metrics,
            "wall_s": wall,
            "own_weights": round((evaluation.exact_match if evaluation else 0) * len(pairs)),
            "as_stored": served_as_stored(scratch / "adapter", base, pairs),
        }
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", nargs="*", default=["qwen2.5-0.5b", "qwen2.5-3b"])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument("--checkpointing", action="store_true", help="in every run")
    parser.add_argument("--no-quality", action="store_true")
    parser.add_argument(
        "--on-gpu",
        action="store_true",
        help="train on CUDA in this process, the peak the allocator's (implies --no-quality)",
    )
    args = parser.parse_args()
    ratios: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="qatune-qlora-") as directory:
        tmp = Path(directory)
        print(
            f"### Memory and speed ({PAIRS} pairs, batch {BATCH}, {args.steps} steps, "
            f"random weights{', checkpointing' if args.checkpointing else ''})\n\n"
            f"| shape | base | planned GB | {'CUDA peak' if args.on_gpu else 'peak RSS'} GB "
            "| planned/peak | peak vs as stored "
            "| job tok/s | loop tok/s | final loss | mean loss |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
        )
        for shape in args.shapes:
            measure = bench_shape_on_gpu if args.on_gpu else bench_shape
            runs = measure(shape, args.steps, tmp / shape, args.kinds, args.checkpointing)
            stored = runs.get("none") or next(iter(runs.values()))
            for kind, run in runs.items():
                m = run.metrics
                print(
                    f"| {shape} | {kind} | {run.estimated_gb:.2f} | {run.peak_gb:.2f} | "
                    f"{run.estimated_gb / run.peak_gb - 1:+.0%} | "
                    f"{run.peak_gb / stored.peak_gb:.2f}x | {run.job_tokens_per_s:,.0f} | "
                    f"{m['tokens_per_second']:,.0f} | {m['final_loss']:.4f} | "
                    f"{m['train_loss']:.4f} |",
                    flush=True,
                )
                if kind != "none":
                    ratios[f"{shape}:{kind}:memory_saved"] = stored.peak_gb / run.peak_gb
                    ratios[f"{shape}:{kind}:job_speed"] = (
                        run.job_tokens_per_s / stored.job_tokens_per_s
                    )
        if not (args.no_quality or args.on_gpu):
            rows = bench_quality(tmp / "quality")
            print(
                "\n### Quality (builtin:tiny, 30-pair FAQ, defaults)\n\n"
                "| base | epochs | learned (loop) | exact on its own base (as qatune serves) "
                "| exact on the base as stored (merged exports) | final loss | wall s |\n"
                "|---|---:|---:|---:|---:|---:|---:|"
            )
            for kind, row in rows.items():
                m = row["metrics"]
                print(
                    f"| {kind} | {m['epochs']:g} | {m['train_exact_match']:.0%} | "
                    f"{row['own_weights']}/30 | {row['as_stored']}/30 | {m['final_loss']:.4f} "
                    f"| {row['wall_s']:.0f} |",
                    flush=True,
                )
                ratios[f"quality:{kind}:served_exact"] = row["as_stored"] / 30
    command = "python -m bench.quantized_training " + " ".join(sys.argv[1:])
    print(f"\nrecorded in {record('quantized_training', ratios, command.strip())}")


if __name__ == "__main__":
    main()
