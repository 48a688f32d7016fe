"""The job's answer table, side by side: transformers' `generate` against the serving engine.

    python -m bench.answer_table --shape qwen2.5-0.5b

On one model of the shape (random weights, the built-in tokenizer) with a random adapter,
the table of a job without a validation split (20 training questions, each asked with the
adapter and without it) is decoded three ways in this process, one after another:

  generate   the table before it went through the engine: transformers' `generate` on
             the peft model, 16 rows at a time, tuned rows then base rows
  engine     the engine: tuned and base rows in one batch, prompts prefilled together,
             each row adding its own LoRA delta (a job's first table on a base)
  warm       the next job's table on that base: the base answers read from the first,
             the tuned rows on the adapter merged into the weights

Each takes a fresh copy of the model (the trainer hands its own over). The answers of all
three must be the same; the seconds, the ratios and peak RSS growth are reported.
"""

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from app.ml.builtin import BUILTIN_TINY
from app.ml.data import encode_pair
from app.ml.models import load_causal_lm, load_tokenizer
from app.ml.pairs import QAPair
from app.ml.training.base_answers import BaseAnswers
from app.ml.training.evaluation import (
    KEEP_WRONG_TOKENS,
    MAX_TRAINING_ROWS,
    TableModel,
    answer_table,
)
from bench.adapters import random_adapter
from bench.reference_answers import generate_answers
from bench.results import record
from bench.train_throughput import SHAPES, make_model, make_pairs


def generate_table(model_dir: Path, adapter_dir: Path, pairs: list[QAPair]) -> list[str]:
    """Tuned answers, then base answers, as the table decoded them with `generate`."""
    from peft import PeftModel

    tokenizer = load_tokenizer(model_dir)
    model = load_causal_lm(model_dir, dtype=torch.float32, device="cpu")
    model = PeftModel.from_pretrained(model, adapter_dir).eval()
    expected = [e.input_ids[e.prompt_len :] for e in (encode_pair(tokenizer, p) for p in pairs)]
    conversations = [p.prompt_messages() for p in pairs]
    options: dict[str, Any] = {
        "device": "cpu",
        "max_new_tokens": max(KEEP_WRONG_TOKENS, *(len(e) + 1 for e in expected)),
        "expected": expected,
        "keep_wrong_tokens": KEEP_WRONG_TOKENS,
    }
    tuned = generate_answers(model, tokenizer, conversations, **options)
    with model.disable_adapter():
        base = generate_answers(model, tokenizer, conversations, **options)
    return [a.strip() for a in [*tuned, *base]]


def engine_table(
    model_dir: Path, adapter_dir: Path, pairs: list[QAPair], answers: BaseAnswers
) -> tuple[list[str], int]:
    from peft import PeftModel

    def weights(merged: bool) -> Any:
        model = load_causal_lm(model_dir, dtype=torch.float32, device="cpu")
        if merged:
            model = PeftModel.from_pretrained(model, adapter_dir).merge_and_unload()
        return model.eval()

    table = TableModel(weights, load_tokenizer(model_dir), BUILTIN_TINY, adapter_dir, "cpu", "fp32")
    report = answer_table(table, pairs, split="training", base_answers=answers)
    rows = report.rows
    return [r.tuned for r in rows] + [r.base for r in rows], report.base_reused


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=list(SHAPES), default="qwen2.5-0.5b")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="qatune-bench-") as tmp:
        scratch = Path(tmp)
        model_dir = make_model(args.shape, scratch)
        # The adapter's metadata names the built-in model: the engine checks the name only.
        adapter_dir = random_adapter(
            model_dir, scratch / "adapter", base_model=BUILTIN_TINY, seed=1, rank=8
        )
        pairs = [QAPair(q, a) for q, a in make_pairs(MAX_TRAINING_ROWS)]
        answers = BaseAnswers(scratch / "answers", model_dir, device="cpu", precision="fp32")
        timings: dict[str, float] = {}
        results: dict[str, list[str]] = {}
        reused: dict[str, int] = {}
        for name in ("generate", "engine", "warm"):
            print(f"  {args.shape}: {name} …", file=sys.stderr, flush=True)
            started = time.perf_counter()
            if name == "generate":
                results[name] = generate_table(model_dir, adapter_dir, pairs)
            else:
                results[name], reused[name] = engine_table(model_dir, adapter_dir, pairs, answers)
            timings[name] = time.perf_counter() - started
    same = results["engine"] == results["generate"] == results["warm"]
    ratios = {
        f"{args.shape} answer table, first job (engine / generate)": timings["generate"]
        / timings["engine"],
        f"{args.shape} answer table, next job (warm / generate)": timings["generate"]
        / timings["warm"],
    }
    print(
        f"### {args.shape}: {len(pairs)} questions, each with the adapter and without it\n\n"
        "| way | seconds (model load included) | vs generate | base answers reused |\n"
        "| --- | ---: | ---: | ---: |"
    )
    for name, seconds in timings.items():
        print(
            f"| {name} | {seconds:.1f} | {timings['generate'] / seconds:.2f}x | "
            f"{reused.get(name, 0)} |"
        )
    print(
        f"\nSame answers in all three ways: {'yes' if same else 'NO'}; peak RSS of this "
        f"process {rss_mb():,.0f} MB."
    )
    path = record("answer_table", ratios, f"python -m bench.answer_table --shape {args.shape}")
    print(f"Ratios recorded in {path}")
    if not same:
        mismatched = [
            i
            for i, (a, b) in enumerate(zip(results["generate"], results["engine"], strict=True))
            if a != b
        ]
        print(json.dumps({"rows that differ (generate vs engine)": mismatched}))
        sys.exit(1)


if __name__ == "__main__":
    main()
