"""One job trained by one process or by two data-parallel processes (gloo), on this CPU,
side by side in one run, through `qatune train` (the service's trainer).

    python -m bench.data_parallel [--pairs 100] [--epochs 3] [--rounds 2]

Both train the same FAQ set (bench.faq_data, medium answers, mixed languages) for the
same fixed epochs, batch 8, lr 3e-3. One process sizes its threads to the cores (2 here);
two processes each take what the other leaves (1 each). Reported: whole-job real
tokens/s, the mean step time, and the final loss. On a GPU host each process has a GPU of
its own; here the two share two cores, so this measures the overhead of the split
(a gradient all-reduce a step, two model copies), not a speed-up from more hardware.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from app.ml.builtin import ensure_builtin_model
from bench.faq_data import faq

ROOT = Path(__file__).resolve().parents[1]


def train(data: Path, scratch: Path, epochs: int, processes: int) -> dict[str, Any]:
    out = scratch / f"p{processes}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("QATUNE_")}
    env.update(QATUNE_DATA_DIR=str(scratch / "d"), QATUNE_OFFLINE="true")
    command = [
        sys.executable, "-m", "app.cli", "train", "--data", str(data),
        "--output", str(out), "--metrics-json", str(out.with_suffix(".json")),
        "--epochs", str(epochs), "--batch-size", "8", "--learning-rate", "3e-3",
        "--validation-split", "0", "--processes", str(processes),
    ]  # fmt: skip
    subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True)
    metrics: dict[str, Any] = json.loads(out.with_suffix(".json").read_text())
    return metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        scratch = Path(name)
        (scratch / "d").mkdir()
        ensure_builtin_model(scratch / "d" / "models")
        data = scratch / "faq.jsonl"
        pairs = faq(args.pairs, "medium", "mixed")
        data.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs))
        rows = []
        for round_ in range(args.rounds):
            for processes in (1, 2) if round_ % 2 == 0 else (2, 1):
                m = train(data, scratch, args.epochs, processes)
                rows.append((round_ + 1, processes, m))
                speed = m["tokens_per_second"]
                print(f"round {round_ + 1}, {processes} process(es): {speed:,.0f} tok/s")
    print(f"\n{args.pairs} pairs x {args.epochs} epochs, batch 8\n")
    print("| round | processes | whole-job tok/s | step s | steps | final loss |")
    print("|---:|---:|---:|---:|---:|---:|")
    for round_, processes, m in rows:
        step = m["train_runtime_s"] / m["train_steps"]
        print(
            f"| {round_} | {processes} | {m['tokens_per_second']:,.0f} | {step:.3f} | "
            f"{m['train_steps']} | {m['final_loss']:.4f} |"
        )
    for round_ in range(1, args.rounds + 1):
        speed = {p: m["tokens_per_second"] for r, p, m in rows if r == round_}
        print(f"\nround {round_}: 2 processes / 1 process: {speed[2] / speed[1]:.2f}x")


if __name__ == "__main__":
    main()
