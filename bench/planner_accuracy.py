"""How close is the memory planner to the real peak? Plan, then train, for several shapes.

    python -m bench.planner_accuracy [--faq-only] [--dpo] [--shapes builtin:tiny,small-23M]
        [--faqs builtin,real]

For each shape: a random-initialised Qwen2 model (or the built-in one, or the real
pretrained one, SmolLM2-135M-Instruct: bench/real_model.py), the planner's estimate for a
job on it, then `qatune train` for 24 steps (three epochs of 64 pairs) in a child process
whose own peak RSS (bench/peak.py) is the measured figure. Prints the error of the
estimate for each shape.
Then default jobs (auto: until learned, with the answer table, and on the real model the
forgetting meter and the scope): the built-in model's on FAQs no one tuned for
(bench/faq_data.py), long and medium answers, English and Chinese, and the real model's on
bench/data's staff FAQ.
With --dpo the shapes' jobs are DPO on preference pairs (each answer preferred over the
next pair's), in OpenAI's preference file, and the FAQ jobs are left out.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.faq_data import Language, Length
from bench.peak import run_measured
from bench.real_model import DATA, REAL, real_model_dir
from bench.train_throughput import ROOT, make_model, make_pairs, qatune_train_command
from bench.train_throughput import SHAPES as THROUGHPUT_SHAPES

BUILTIN = "builtin:tiny"  # the model a new user's first job trains
SHAPES: dict[str, dict[str, Any]] = {
    BUILTIN: {},
    REAL: {},
    "tiny-8M": {
        "hidden_size": 256,
        "intermediate_size": 768,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 32000,
    },
    "small-23M": THROUGHPUT_SHAPES["small"],
    "mid-140M": {
        "hidden_size": 768,
        "intermediate_size": 2048,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "num_key_value_heads": 4,
        "vocab_size": 65536,
    },
    "qwen2.5-0.5b": THROUGHPUT_SHAPES["qwen2.5-0.5b"],
}
# Three epochs of the 64 pairs: a job meets its row lengths (and their kernels) in the first
# epoch or two, so fewer steps would miss part of the peak.
STEPS = 24


FAQS: list[tuple[int, Length, Language]] = [
    (40, "long", "mixed"),
    (30, "medium", "en"),
    (30, "long", "zh"),
]


Pair = tuple[str, str] | tuple[str, str, str]  # question, answer (, the rejected answer)


def estimate(
    model_dir: Path, pairs: Sequence[Pair], asked: dict[str, Any] | None = None
) -> dict[str, Any]:
    from transformers import AutoTokenizer

    from app.ml.data import data_facts, encode_pair
    from app.ml.device import plan_device, probe_capabilities
    from app.ml.hyperparameters import HyperparameterRequest
    from app.ml.models import read_model_facts
    from app.ml.pairs import QAPair
    from app.ml.planner import plan_training

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    device_plan = plan_device(probe_capabilities(), "cpu")
    facts = read_model_facts(model_dir)
    plan = plan_training(  # the call the trainer makes
        HyperparameterRequest.model_validate(
            {
                "batch_size": 8,
                "lora_r": 8,
                "validation_split": 0,
                "max_seq_length": 4096,
                "max_steps": STEPS,
            }
            if asked is None
            else asked
        ),
        data=data_facts([encode_pair(tokenizer, _pair(QAPair, pair)) for pair in pairs]),
        shape=facts.shape,
        recommended=facts.recommended,
        device="cpu",
        precision=device_plan.precision_for("auto"),
        budget_gb=device_plan.memory_budget_gb,
        budget_reason=device_plan.budget_reason.english(),
        quantizations=device_plan.quantization.kinds,
    )
    return plan.memory.as_dict()  # estimated_peak_gb, and what makes it up


def measure(
    model_dir: Path, data: Path, scratch: Path, options: dict[str, Any] | None = None
) -> float:
    given = {
        "max_steps": STEPS,
        "batch_size": 8,
        "lora_rank": 8,
        "validation_split": 0,
        "max_seq_length": 4096,
    }
    command = qatune_train_command(
        model_dir, data, scratch / "adapter", **(given if options is None else options)
    )
    env = {
        **os.environ,
        "QATUNE_DATA_DIR": str(scratch / "d"),
        "QATUNE_OFFLINE": "true",
        "QATUNE_LOG_DIR": str(scratch / "logs"),
    }
    status, _, peak_gb = run_measured(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    if status != 0:
        raise RuntimeError(f"training {model_dir.name} failed")
    return peak_gb


def real_faq_row() -> str:
    """The real model's default job on the staff FAQ: plan against peak."""
    records = [
        {"question": p["question"], "answer": p["answer"]}
        for p in json.loads((DATA / "staff_faq.json").read_text())["pairs"]
    ]
    with tempfile.TemporaryDirectory(prefix="qatune-plan-") as tmp:
        scratch = Path(tmp)
        model_dir = real_model_dir()
        data = scratch / "qa.jsonl"
        data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
        plan = estimate(model_dir, [(r["question"], r["answer"]) for r in records], asked={})
        started = time.perf_counter()
        measured = measure(model_dir, data, scratch, options={})
        error = plan["estimated_peak_gb"] / measured - 1
        print(f"  {REAL} staff FAQ: {time.perf_counter() - started:.0f}s", file=sys.stderr)
        return (
            f"| {REAL}, default job, staff FAQ ({len(records)} pairs) | 135M | "
            f"{plan['estimated_peak_gb']:.2f} | {measured:.2f} | {error:+.0%} |"
        )


def faq_rows() -> list[str]:
    """The built-in model's default job on each FAQ: plan against peak."""
    from app.ml.builtin import ensure_builtin_model
    from bench.faq_data import faq

    rows = []
    for size, length, language in FAQS:
        with tempfile.TemporaryDirectory(prefix="qatune-plan-") as tmp:
            scratch = Path(tmp)
            model_dir = ensure_builtin_model(scratch / "models")
            records = faq(size, length, language, seed=5)
            pairs = [(r["question"], r["answer"]) for r in records]
            data = scratch / "qa.jsonl"
            data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
            plan = estimate(model_dir, pairs, asked={})
            measured = measure(model_dir, data, scratch, options={})
            error = plan["estimated_peak_gb"] / measured - 1
            rows.append(
                f"| builtin:tiny, default job, FAQ {size} {length} {language} | 3M | "
                f"{plan['estimated_peak_gb']:.2f} | {measured:.2f} | {error:+.0%} |"
            )
            print(f"  FAQ {size} {length} {language} done", file=sys.stderr, flush=True)
    return rows


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--faq-only", action="store_true")
    parser.add_argument(
        "--dpo", action="store_true", help="each shape's DPO job too, beside its supervised one"
    )
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated")
    parser.add_argument(
        "--faqs", default="builtin,real", help="whose default jobs: builtin, real (or both)"
    )
    args = parser.parse_args()
    qa = make_pairs(64)
    preferences: list[Pair] = [(q, a, qa[(i + 1) % len(qa)][1]) for i, (q, a) in enumerate(qa)]
    supervised: list[Pair] = list(qa)
    jobs = [("", supervised)] + ([(" (DPO)", preferences)] if args.dpo else [])
    rows = [
        "| shape | parameters | estimated peak GB | measured peak RSS GB | error |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for shape in [] if args.faq_only else args.shapes.split(","):
        for label, pairs in jobs:
            rows.append(_shape_row(shape, label, pairs))
    if not args.dpo:
        faqs = args.faqs.split(",")
        rows += faq_rows() if "builtin" in faqs else []
        rows += [real_faq_row()] if "real" in faqs else []
    print("\n".join(rows))


def _shape_row(shape: str, label: str, pairs: list[Pair]) -> str:
    """Plan, then train, a job on `pairs` on a fresh copy of the shape."""
    from app.ml.shapes import ModelShape

    with tempfile.TemporaryDirectory(prefix="qatune-plan-") as tmp:
        scratch = Path(tmp)
        if shape == BUILTIN:
            from app.ml.builtin import ensure_builtin_model

            model_dir = ensure_builtin_model(scratch / "models")
        elif shape == REAL:
            model_dir = real_model_dir()
        else:
            model_dir = make_model(shape, scratch, SHAPES[shape])
        data = scratch / "qa.jsonl"
        data.write_text("".join(json.dumps(_record(pair)) + "\n" for pair in pairs))
        plan = estimate(model_dir, pairs)
        started = time.perf_counter()
        measured = measure(model_dir, data, scratch)
        params = ModelShape.from_config(json.loads((model_dir / "config.json").read_text()))
        error = plan["estimated_peak_gb"] / measured - 1
        seconds = time.perf_counter() - started
        print(f"  {shape}{label}: {seconds:.0f}s", file=sys.stderr, flush=True)
        return (
            f"| {shape}{label} | {params.num_params / 1e6:,.0f}M | "
            f"{plan['estimated_peak_gb']:.2f} | {measured:.2f} | {error:+.0%} |"
        )


def _pair(make: Any, pair: Pair) -> Any:
    """The QAPair the trainer reads from the record: a DPO pair carries its rejected answer."""
    return make(pair[0], pair[1], rejected=pair[2] if len(pair) == 3 else None)


def _record(pair: Pair) -> dict[str, Any]:
    """A QA record, or OpenAI's preference record for a pair with a rejected answer."""
    if len(pair) == 2:
        return {"question": pair[0], "answer": pair[1]}
    question, preferred, rejected = pair
    return {
        "input": {"messages": [{"role": "user", "content": question}]},
        "preferred_output": [{"role": "assistant", "content": preferred}],
        "non_preferred_output": [{"role": "assistant", "content": rejected}],
    }


if __name__ == "__main__":
    main()
