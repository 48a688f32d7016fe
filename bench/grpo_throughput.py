"""Reinforcement fine-tuning (GRPO), side by side: TRL's GRPOTrainer + peft against
`qatune train --grader` on the same model, data, grader and settings, each in its own
process, in one run.

    python -m bench.grpo_throughput
    python -m bench.grpo_throughput --sft-steps 18 --epochs 12 --group-size 16

The model is the built-in one trained supervised on tests/data/faq_short.jsonl and stopped
early (`--sft-steps`: about half its answers right), merged into its weights, so that both
recipes start from the same model with a new LoRA adapter (rank 16, every linear layer)
and the same reference (that model, the adapter off). The reward is the exact answer
(qatune: a string_check grader, eq; TRL: the same comparison as a reward function). Both
sample `--group-size` answers a prompt at qatune's temperature and min_p, 8 prompts a
step, and take one update per sampling with the token-level loss. TRL runs from its own
virtual environment (bench/.venv-trl, made on the first run), as it would in production.

Reported: answers sampled a second over the whole loop, the whole job's wall time, the
peak RSS, and the reward curve (each step's mean reward, and the mean of the first and
last epochs).
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from app.ml.training.reinforcement import MIN_P, TEMPERATURE
from bench.dpo_throughput import run, trl_python
from bench.results import record
from bench.train_throughput import ROOT

FAQ = ROOT / "tests" / "data" / "faq_short.jsonl"
EXACT = {
    "type": "string_check",
    "name": "exact",
    "input": "{{ sample.output_text }}",
    "reference": "{{ item.answer }}",
    "operation": "eq",
}


def qatune_rewards(log: Path) -> list[float]:
    return [
        float(line.split(" reward mean ")[1].split()[0])
        for line in log.read_text().splitlines()
        if " reward mean " in line and "step " in line
    ]


def bench(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="qatune-grpo-") as tmp:
        scratch = Path(tmp)
        cli = [sys.executable, "-m", "app.cli"]
        base = scratch / "base"
        run([*cli, "export-base", "builtin:tiny", str(base)], scratch, "export-base")
        sft = scratch / "sft"
        run(
            [*cli, "train", "--base-model", str(base), "--data", str(FAQ), "--output", str(sft),
             "--max-steps", str(args.sft_steps), "--validation-split", "0"],
            scratch, "sft",
        )  # fmt: skip
        start = scratch / "start"  # the half-trained model, merged: both start from it
        run(
            [*cli, "export", "--adapter", str(sft), "--format", "merged", str(start)],
            scratch,
            "merge",
        )
        prompts = sum(1 for line in FAQ.read_text().splitlines() if line.strip())
        settings = {
            "epochs": args.epochs,
            "batch_size": 8,
            "group_size": args.group_size,
            "learning_rate": args.learning_rate,
            "beta": 0.04,
            "temperature": TEMPERATURE,  # qatune's own (reinforcement.py)
            "min_p": MIN_P,
            "max_answer_tokens": args.max_answer_tokens,
            "lora_r": 16,
            "lora_alpha": 32,
        }
        grader = scratch / "grader.json"
        grader.write_text(json.dumps(EXACT))
        qatune = [
            *cli, "train", "--base-model", str(start), "--data", str(FAQ),
            "--output", str(scratch / "qatune-adapter"), "--grader", str(grader),
            "--epochs", str(args.epochs), "--batch-size", "8",
            "--group-size", str(args.group_size), "--learning-rate", str(args.learning_rate),
            "--lora-r", "16", "--lora-alpha", "32", "--beta", "0.04",
            "--validation-split", "0", "--metrics-json", str(scratch / "qatune.json"),
        ]  # fmt: skip
        trl = [
            str(trl_python()), str(ROOT / "bench" / "grpo_trl_child.py"), str(start),
            str(FAQ), str(scratch / "trl-adapter"), json.dumps(settings),
            str(scratch / "trl.json"),
        ]  # fmt: skip
        results: dict[str, Any] = {"settings": settings, "prompts": prompts}
        for name, command in (("trl", trl), ("qatune", qatune)):
            wall, peak = run(command, scratch, name)
            metrics = json.loads((scratch / f"{name}.json").read_text())
            rewards = (
                metrics["rewards"] if name == "trl" else qatune_rewards(scratch / f"{name}.log")
            )
            loop = metrics["train_runtime_s"] if name == "qatune" else metrics["loop_s"]
            # TRL's steps are always whole (8 prompts; an epoch's remainder is left out),
            # qatune's take every prompt of an epoch (its last step the remainder)
            asked = len(rewards) * 8 if name == "trl" else prompts * args.epochs
            answers = asked * args.group_size
            per_epoch = max(1, len(rewards) // args.epochs)
            first, last = rewards[:per_epoch], rewards[-per_epoch:]
            results[name] = {
                "wall_s": round(wall, 1),
                "loop_s": round(loop, 2),
                "answers_per_s": round(answers / loop, 1),
                "peak_rss_mb": round(peak),
                "steps": len(rewards),
                "first_epoch_reward": round(sum(first) / max(1, len(first)), 3),
                "last_epoch_reward": round(sum(last) / max(1, len(last)), 3),
                "rewards": [round(r, 3) for r in rewards],
            }
        results["answers_per_s_ratio"] = round(
            results["qatune"]["answers_per_s"] / results["trl"]["answers_per_s"], 2
        )
        results["wall_ratio"] = round(results["trl"]["wall_s"] / results["qatune"]["wall_s"], 2)
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sft-steps", type=int, default=11)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=9e-4)  # qatune's auto here
    parser.add_argument("--max-answer-tokens", type=int, default=32)
    args = parser.parse_args()
    results = bench(args)
    print(json.dumps(results, indent=2))
    ratios = {"answers_per_s": results["answers_per_s_ratio"], "wall": results["wall_ratio"]}
    record(
        "grpo_throughput", ratios, "python -m " + " ".join(["bench.grpo_throughput", *sys.argv[1:]])
    )


if __name__ == "__main__":
    main()
