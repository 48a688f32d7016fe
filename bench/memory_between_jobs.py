"""Does memory come back between jobs? Ten jobs, three ways, the long-lived process's RSS.

    python -m bench.memory_between_jobs [--jobs 10] [--shape small]

  in-process        the field notes' way: train in the service's process, then
                    `del model; gc.collect(); empty_cache()`
  in-process+trim   the same, plus glibc's malloc_trim(0)
  qatune            each job in a fresh child process (app/worker), cleanup in both

Each way runs in a fresh interpreter of its own; the RSS is that interpreter's.
"""

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.train_throughput import ROOT, make_model, make_pairs


def _train(model_dir: str, scratch: str, index: int) -> None:
    from app.ml.device import plan_device, probe_capabilities
    from app.ml.hyperparameters import HyperparameterRequest
    from app.ml.pairs import QAPair
    from app.ml.training.request import TrainingRequest
    from app.ml.training.trainer import ModelTrainer

    ModelTrainer(
        TrainingRequest(
            base_model=model_dir,
            pairs=[QAPair(q, a) for q, a in make_pairs(64, seed=index)],
            output_dir=Path(scratch) / f"adapter-{index}",
            model_cache_dir=Path(scratch) / "models",
            hyperparameters=HyperparameterRequest(max_steps=4, validation_split=0),
            device_plan=plan_device(probe_capabilities(), "cpu"),
            offline=True,
        ),
        on_event=lambda event: None,
    ).run()


def run_way(way: str, model_dir: str, scratch: str, jobs: int) -> list[float]:
    import gc

    import psutil

    from app.ml.memory import _malloc_trim, release_memory

    process = psutil.Process()
    rss = [process.memory_info().rss / 2**20]
    for index in range(jobs):
        if way == "qatune":
            context = multiprocessing.get_context("spawn")
            child = context.Process(target=_train, args=(model_dir, scratch, index))
            child.start()
            child.join()
            release_memory()
        else:
            _train(model_dir, scratch, index)
            gc.collect()
            torch = sys.modules["torch"]
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            if way == "in-process+trim":
                _malloc_trim()
        rss.append(process.memory_info().rss / 2**20)
    return rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--shape", default="small")
    parser.add_argument("--way", help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", help=argparse.SUPPRESS)
    parser.add_argument("--scratch", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.way:
        print(json.dumps(run_way(args.way, args.model_dir, args.scratch, args.jobs)))
        return
    with tempfile.TemporaryDirectory(prefix="qatune-mem-") as tmp:
        model_dir = make_model(args.shape, Path(tmp))
        results: dict[str, Any] = {}
        for way in ("in-process", "in-process+trim", "qatune"):
            print(f"  {way} …", file=sys.stderr, flush=True)
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.memory_between_jobs",
                    "--way",
                    way,
                    "--model-dir",
                    str(model_dir),
                    "--scratch",
                    tmp,
                    "--jobs",
                    str(args.jobs),
                ],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "TOKENIZERS_PARALLELISM": "false"},
            )
            results[way] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"RSS of the long-lived process (MB), {args.jobs} jobs on the {args.shape} shape:\n")
    print("| way | before | after job 1 | after last job | growth from job 1 to last |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for way, rss in results.items():
        print(
            f"| {way} | {rss[0]:,.0f} | {rss[1]:,.0f} | {rss[-1]:,.0f} | {rss[-1] - rss[1]:+,.0f} |"
        )


if __name__ == "__main__":
    main()
