"""DPO throughput, side by side: TRL's DPOTrainer + peft against `qatune train` on the same
model, data and hyperparameters, each in its own process, in one run.

    python -m bench.dpo_throughput --shape small --pairs 64 --epochs 2
    python -m bench.dpo_throughput --shape qwen2.5-0.5b --pairs 32 --epochs 1

Both train a rank-8 LoRA on every linear layer of a random-initialised Qwen2 of the shape
(the built-in byte tokenizer), batch 8, lr 2e-4, beta 0.1, DPO's sigmoid loss plus the
preferred answers' NLL with weight 1 (TRL's `loss_type=["sigmoid", "sft"]`, qatune's
loss), no dropout,
fp32 on this CPU. TRL runs from its own virtual environment (bench/.venv-trl, made on the
first run: trl pins its own dependencies), as it would in production. Reported: the whole
job (process start to exit, the model's load and the adapter's save included) and the
training loop, in tokens/s over the same tokens (both answers of every pair, every
epoch), the peak RSS, and the loss at the first and last steps.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.peak import run_measured
from bench.train_throughput import ROOT, make_model, make_pairs

LORA_R, LORA_ALPHA, LR, BATCH, BETA = 8, 16, 2e-4, 8, 0.1
TRL_VENV = ROOT / "bench" / ".venv-trl"
TRL_PACKAGES = [
    "torch==2.13.0", "transformers==5.23.0", "peft==0.21.2", "accelerate==1.15.0", "trl==1.16.0"
]  # fmt: skip


def preference_records(pairs: int, seed: int = 0) -> list[dict[str, Any]]:
    """OpenAI preference records: each question's answer preferred over another's."""
    made = make_pairs(pairs * 2, seed)
    rng = random.Random(seed)
    records = []
    for question, answer in made[:pairs]:
        other = rng.choice(made[pairs:])[1]
        records.append(
            {
                "input": {"messages": [{"role": "user", "content": question}]},
                "preferred_output": [{"role": "assistant", "content": answer}],
                "non_preferred_output": [{"role": "assistant", "content": other}],
            }
        )
    return records


def trl_python() -> Path:
    python = TRL_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(TRL_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *TRL_PACKAGES], check=True)
    return python


def run(command: list[str], scratch: Path, name: str) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of a child process."""
    env = {**os.environ, "QATUNE_DATA_DIR": str(scratch / "data"), "QATUNE_OFFLINE": "true"}
    env.setdefault("OMP_NUM_THREADS", str(os.cpu_count() or 1))
    log = scratch / f"{name}.log"
    with log.open("w") as out:
        status, wall, peak_gb = run_measured(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    if status != 0:
        raise RuntimeError(f"{name} failed: {log.read_text()[-3000:]}")
    return wall, peak_gb * 1024


def qatune_losses(log: Path) -> list[float]:
    return [
        float(line.split(" loss ")[1].split()[0])
        for line in log.read_text().splitlines()
        if " loss " in line and "step " in line
    ]


def bench(shape: str, pairs: int, epochs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="qatune-dpo-") as tmp:
        scratch = Path(tmp)
        model_dir = make_model(shape, scratch)
        data = scratch / "prefs.jsonl"
        data.write_text("\n".join(json.dumps(r) for r in preference_records(pairs)) + "\n")
        tokens = count_tokens(model_dir, data) * epochs
        qatune_metrics = scratch / "qatune.json"
        qatune = [
            sys.executable, "-m", "app.cli", "train", "--base-model", str(model_dir),
            "--data", str(data), "--output", str(scratch / "qatune-adapter"),
            "--epochs", str(epochs), "--batch-size", str(BATCH), "--learning-rate", str(LR),
            "--lora-r", str(LORA_R), "--lora-alpha", str(LORA_ALPHA), "--lora-dropout", "0",
            "--max-seq-length", "4096", "--validation-split", "0", "--beta", str(BETA),
            "--metrics-json", str(qatune_metrics),
        ]  # fmt: skip
        trl_metrics = scratch / "trl.json"
        trl = [
            str(trl_python()), str(ROOT / "bench" / "dpo_trl_child.py"), str(model_dir),
            str(data), str(scratch / "trl-adapter"), str(epochs), str(trl_metrics),
        ]  # fmt: skip
        results: dict[str, Any] = {"shape": shape, "pairs": pairs, "epochs": epochs}
        for name, command in (("trl", trl), ("qatune", qatune)):
            wall, peak = run(command, scratch, name)
            metrics = json.loads((scratch / f"{name}.json").read_text())
            losses = metrics["losses"] if name == "trl" else qatune_losses(scratch / f"{name}.log")
            loop = metrics["train_runtime_s"] if name == "qatune" else metrics["loop_s"]
            results[name] = {
                "wall_s": round(wall, 1),
                "whole_job_tok_s": round(tokens / wall, 1),
                "loop_s": round(loop, 2),
                "loop_tok_s": round(tokens / loop, 1),
                "peak_rss_mb": round(peak),
                "first_loss": round(losses[0], 4),
                "last_loss": round(losses[-1], 4),
                "steps": len(losses),
            }
        results["whole_job_ratio"] = round(
            results["qatune"]["whole_job_tok_s"] / results["trl"]["whole_job_tok_s"], 2
        )
        results["loop_ratio"] = round(
            results["qatune"]["loop_tok_s"] / results["trl"]["loop_tok_s"], 2
        )
        return results


def count_tokens(model_dir: Path, data: Path) -> int:
    """Both answers' whole sequences (prompt included) of every pair, as the chat template
    renders them: the tokens each recipe runs an epoch."""
    from app.ml.data import encode_pair
    from app.ml.models import load_tokenizer
    from app.services.datasets.qa_parsing import parse_qa_bytes

    tokenizer = load_tokenizer(model_dir)
    total = 0
    for pair in parse_qa_bytes(data.read_bytes(), filename=data.name).pairs:
        example = encode_pair(tokenizer, pair)
        assert example.rejected is not None
        total += example.num_tokens + example.rejected.num_tokens
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="small", choices=["small", "qwen2.5-0.5b"])
    parser.add_argument("--pairs", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    print(json.dumps(bench(args.shape, args.pairs, args.epochs), indent=2))


if __name__ == "__main__":
    main()
