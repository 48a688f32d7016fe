"""Where a job's memory goes: its RSS sampled every 10 ms, the highest in each phase.

    python -m bench.rss_by_phase [--shape qwen2.5-0.5b] [--batch 8] [--steps 2]
        [--checkpointing] [--quantization 4bit] [--faq 40,long,mixed] [--saved]
        [--precision fp32]

One `ModelTrainer` job in this process on 64 generated pairs (bench.train_throughput's
`make_pairs`), on a random-initialised model of one of bench.planner_accuracy's shapes (or
the built-in model, or the real one: smollm2-135m-instruct), made in a child process so
that its making is not in this one's RSS. With --faq, the built-in model's default job on
a FAQ of bench/faq_data.py instead (the other options then do not apply). A phase is the
time since the job's last event, named by that event's message: loading ("Fused LoRA
linear layers"), the first steps ("Training on …"), the loop ("step N"), the checks and
the answer table after it. The planner's estimate is the plan event's own line. With
--saved, also what autograd keeps for the backward of each micro-batch (the tensors its
forward saves, each storage once, the model's weights left out), per token and per token
and layer: the activations the planner counts, without the heap's slack or the backward's
transients. What the planner counts against what the loop holds: docs/benchmarks.md,
"Planner accuracy".
"""

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, cast

from bench.faq_data import Language, Length, faq
from bench.planner_accuracy import BUILTIN, SHAPES
from bench.quantized_training import BIG_SHAPES
from bench.real_model import REAL, real_model_dir
from bench.train_throughput import ROOT, make_pairs

if TYPE_CHECKING:
    from app.ml.data import Batch

SAMPLE_S = 0.01


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="qwen2.5-0.5b", choices=[*SHAPES, *BIG_SHAPES])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--checkpointing", action="store_true")
    parser.add_argument("--quantization", default="none", choices=["none", "8bit", "4bit"])
    parser.add_argument("--faq", help="SIZE,LENGTH,LANGUAGE: the built-in model's default job")
    parser.add_argument("--saved", action="store_true", help="count what autograd keeps")
    parser.add_argument("--precision", default="auto", choices=["auto", "bf16", "fp32"])
    args = parser.parse_args()
    saved: list[tuple[int, int]] = []
    if args.saved:
        count_saved_tensors(saved)

    import psutil

    from app.ml.builtin import ensure_builtin_model
    from app.ml.device import plan_device, probe_capabilities
    from app.ml.events import Planned, TrainingEvent
    from app.ml.hyperparameters import HyperparameterRequest
    from app.ml.memory import malloc_figures
    from app.ml.models import read_model_facts
    from app.ml.pairs import QAPair
    from app.ml.planner import MemoryPlan
    from app.ml.training.request import TrainingRequest
    from app.ml.training.trainer import ModelTrainer

    phase = ["imports"]
    highest: dict[str, float] = {}
    in_use: dict[str, float] = {}
    held: dict[str, float] = {}
    process = psutil.Process()

    def sample() -> None:
        while True:
            rss = process.memory_info().rss / 2**30
            highest[phase[0]] = max(highest.get(phase[0], 0.0), rss)
            if info := malloc_figures():
                in_use[phase[0]] = max(in_use.get(phase[0], 0.0), info.in_use / 2**30)
                held[phase[0]] = max(held.get(phase[0], 0.0), info.held / 2**30)
            time.sleep(SAMPLE_S)

    planned: list[MemoryPlan] = []

    def on_event(event: TrainingEvent) -> None:
        phase[0] = event.message.english()[:80]
        if isinstance(event.data, Planned):
            planned.append(event.data.plan)

    with tempfile.TemporaryDirectory(prefix="qatune-rss-") as directory:
        tmp = Path(directory)
        pairs = [QAPair(q, a) for q, a in make_pairs(64)]
        asked = {
            "batch_size": args.batch,
            "max_steps": args.steps,
            "lora_r": 8,
            "validation_split": 0,
            "max_seq_length": 4096,
            "gradient_checkpointing": args.checkpointing,
            "quantization": args.quantization,
            "precision": args.precision,
        }
        shape = BUILTIN if args.faq else args.shape
        if args.faq:  # the default job: nothing asked
            size, length, language = args.faq.split(",")
            records = faq(int(size), cast(Length, length), cast(Language, language), seed=5)
            pairs = [QAPair(r["question"], r["answer"]) for r in records]
            asked = {"precision": args.precision}
        if shape == BUILTIN:
            model_dir = ensure_builtin_model(tmp / "models")
        elif shape == REAL:
            model_dir = real_model_dir()
        else:
            subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import sys; from pathlib import Path; from bench.planner_accuracy import "
                    "SHAPES; from bench.quantized_training import BIG_SHAPES; from "
                    "bench.train_throughput import make_model; make_model(sys.argv[1], "
                    "Path(sys.argv[2]), {**BIG_SHAPES, **SHAPES}[sys.argv[1]])",
                    shape,
                    str(tmp),
                ],
                cwd=ROOT,
                check=True,
                stderr=subprocess.DEVNULL,
            )
            model_dir = tmp / shape
        request = TrainingRequest(
            base_model=str(model_dir),
            pairs=pairs,
            output_dir=tmp / "adapter",
            model_cache_dir=tmp / "cache",
            hyperparameters=HyperparameterRequest.model_validate(asked),
            device_plan=plan_device(probe_capabilities()),
            offline=True,
        )
        layers = read_model_facts(model_dir).shape.num_layers
        threading.Thread(target=sample, daemon=True).start()
        ModelTrainer(request, on_event=on_event).run()
        time.sleep(5 * SAMPLE_S)
    job = f"FAQ {args.faq}, defaults" if args.faq else f"batch {args.batch}"
    print(f"| RSS | malloc in use | malloc holds | phase ({shape}, {job}; highest, GiB) |")
    print("|---:|---:|---:|---|")
    for name, rss in highest.items():
        print(f"| {rss:.3f} | {in_use.get(name, 0.0):.3f} | {held.get(name, 0.0):.3f} | {name} |")
    if planned:
        plan, peak = planned[0], max(highest.values())
        print(
            f"\nplan {plan.estimated_peak_gb:.2f} GiB ({plan.breakdown_gb}), highest RSS "
            f"{peak:.2f} GiB: plan / peak {plan.estimated_peak_gb / peak - 1:+.0%}"
        )
    if saved:
        print("\n| micro-batch tokens | saved GiB | saved bytes / token | / token and layer |")
        print("|---:|---:|---:|---:|")
        for tokens, nbytes in saved:
            print(
                f"| {tokens:,} | {nbytes / 2**30:.3f} | {nbytes / tokens:,.0f} "
                f"| {nbytes / tokens / layers:,.0f} |"
            )


def count_saved_tensors(saved: list[tuple[int, int]]) -> None:
    """Each micro-batch's forward records (tokens, bytes autograd saved for its backward)."""
    import torch

    from app.ml.training.judging import Judging

    learning_loss = Judging.learning_loss

    def counted(self: Judging, batch: "Batch") -> torch.Tensor:
        weights = {p.untyped_storage().data_ptr() for p in self.model.parameters()}
        kept: dict[int, int] = {}

        def pack(tensor: torch.Tensor) -> torch.Tensor:
            storage = tensor.untyped_storage()
            if storage.data_ptr() not in weights:
                kept[storage.data_ptr()] = storage.nbytes()
            return tensor

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            loss = learning_loss(self, batch)
        if loss.requires_grad:  # not the checks' and the answer table's forwards
            saved.append((batch.computed_tokens, sum(kept.values())))
        return loss

    Judging.learning_loss = counted  # type: ignore[method-assign]


if __name__ == "__main__":
    main()
