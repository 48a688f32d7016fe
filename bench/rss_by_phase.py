"""Where a job's memory goes: its RSS sampled every 10 ms, the highest in each phase.

    python -m bench.rss_by_phase [--shape qwen2.5-0.5b] [--batch 8] [--steps 2]
        [--checkpointing] [--faq 40,long,mixed]

One `ModelTrainer` job in this process on 64 generated pairs (bench.train_throughput's
`make_pairs`), on a random-initialised model of one of bench.planner_accuracy's shapes
(or the built-in model), made in a child process so that its making is not in this one's
RSS. With --faq, the built-in model's default job on a FAQ of bench/faq_data.py instead
(the other options then do not apply). A phase is the time since the job's last event,
named by that event's message: loading ("Fused LoRA linear layers"), the first steps
("Training on …"), the loop ("step N"), the checks and the answer table after it. The
planner's estimate is the plan event's own line. What the planner counts against what the
loop holds: docs/benchmarks.md, "Planner accuracy".
"""

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import cast

from bench.faq_data import Language, Length, faq
from bench.planner_accuracy import BUILTIN, SHAPES
from bench.train_throughput import ROOT, make_pairs

SAMPLE_S = 0.01


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="qwen2.5-0.5b", choices=list(SHAPES))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--checkpointing", action="store_true")
    parser.add_argument("--faq", help="SIZE,LENGTH,LANGUAGE: the built-in model's default job")
    args = parser.parse_args()

    import psutil

    from app.ml.builtin import ensure_builtin_model
    from app.ml.device import plan_device, probe_capabilities
    from app.ml.events import TrainingEvent
    from app.ml.hyperparameters import HyperparameterRequest
    from app.ml.pairs import QAPair
    from app.ml.training.request import TrainingRequest
    from app.ml.training.trainer import ModelTrainer

    phase = ["imports"]
    highest: dict[str, float] = {}
    process = psutil.Process()

    def sample() -> None:
        while True:
            rss = process.memory_info().rss / 2**30
            highest[phase[0]] = max(highest.get(phase[0], 0.0), rss)
            time.sleep(SAMPLE_S)

    def on_event(event: TrainingEvent) -> None:
        phase[0] = event.message.english()[:80]

    with tempfile.TemporaryDirectory(prefix="qatune-rss-") as directory:
        tmp = Path(directory)
        pairs = [QAPair(q, a) for q, a in make_pairs(64)]
        asked = {
            "batch_size": args.batch,
            "max_steps": args.steps,
            "lora_r": 8,
            "validation_split": 0,
            "max_seq_length": 4096,
            "gradient_checkpointing": "true" if args.checkpointing else "false",
        }
        shape = BUILTIN if args.faq else args.shape
        if args.faq:  # the default job: nothing asked
            size, length, language = args.faq.split(",")
            records = faq(int(size), cast(Length, length), cast(Language, language), seed=5)
            pairs, asked = [QAPair(r["question"], r["answer"]) for r in records], {}
        if shape == BUILTIN:
            model_dir = ensure_builtin_model(tmp / "models")
        else:
            subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import sys; from pathlib import Path; from bench.planner_accuracy import "
                    "SHAPES; from bench.train_throughput import make_model; "
                    "make_model(sys.argv[1], Path(sys.argv[2]), SHAPES[sys.argv[1]])",
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
        threading.Thread(target=sample, daemon=True).start()
        ModelTrainer(request, on_event=on_event).run()
        time.sleep(5 * SAMPLE_S)
    job = f"FAQ {args.faq}, defaults" if args.faq else f"batch {args.batch}"
    print(f"| highest RSS GiB | phase ({shape}, {job}) |\n|---:|---|")
    for name, rss in highest.items():
        print(f"| {rss:.3f} | {name} |")


if __name__ == "__main__":
    main()
