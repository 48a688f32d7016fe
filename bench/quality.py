"""Does a default job learn a FAQ no one tuned for? Exact answers after "auto" training.

    python -m bench.quality [--sizes 10 30 100 300] [--all-languages]

For each generated set (bench/faq_data.py: unguessable codes and names; short ~30, medium
~80, long ~200 characters; the language rotates over English, Chinese and mixed, or every
language with --all-languages), `qatune train` with default hyperparameters on
builtin:tiny in a child process, then greedy answers to every training question from the
saved adapter to every question it trained on (a set of 100 pairs or more holds 10% out
for validation: unguessable facts it never saw), compared exactly (the query endpoint's
decoding). Prints one table row a set.
"""

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.faq_data import Language, Length, faq
from bench.train_throughput import ROOT

LENGTHS: list[Length] = ["short", "medium", "long"]
LANGUAGES: list[Language] = ["en", "zh", "mixed"]


def held_out(adapter: Path, pairs: int) -> set[int]:
    """The pairs the job kept for validation (auto: 10% from 100 pairs): never trained on."""
    from app.ml.data import validation_indices
    from app.ml.training.adapter_metadata import read_adapter_metadata

    resolved = read_adapter_metadata(adapter).hyperparameters
    return validation_indices(pairs, resolved["validation_split"], resolved["seed"])


def exact_answers(adapter: Path, model_cache: Path, pairs: list[dict[str, str]]) -> int:
    """Greedy answers to every question, decoded 16 at a time (generate_answers: the job's
    own evaluation table decodes the same way, and the e2e tests hold it to the query
    endpoint's answers)."""
    import torch
    from peft import PeftModel

    from app.ml.builtin import ensure_builtin_model
    from app.ml.models import load_causal_lm, load_tokenizer
    from bench.reference_answers import exact_count

    base = ensure_builtin_model(model_cache)
    base_model = load_causal_lm(base, dtype=torch.bfloat16, device="cpu")
    model = PeftModel.from_pretrained(base_model, adapter).eval()
    return exact_count(model, load_tokenizer(base), pairs, "bf16")


def run_set(
    pairs: list[dict[str, str]], scratch: Path, model_cache: Path
) -> tuple[dict[str, Any], float]:
    data = scratch / "faq.jsonl"
    data.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs))
    command = [
        sys.executable, "-m", "app.cli", "train", "--base-model", "builtin:tiny",
        "--data", str(data), "--output", str(scratch / "adapter"),
        "--metrics-json", str(scratch / "metrics.json"),
    ]  # fmt: skip
    env = {"QATUNE_DATA_DIR": str(scratch / "d"), "QATUNE_OFFLINE": "true"}
    (scratch / "d").mkdir()
    (scratch / "d" / "models").symlink_to(model_cache)
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, env={**_environ(), **env}, check=True, capture_output=True)
    wall = time.perf_counter() - started
    return json.loads((scratch / "metrics.json").read_text()), wall


def _environ() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("QATUNE_")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 30, 100, 300])
    parser.add_argument("--lengths", nargs="+", default=LENGTHS, choices=LENGTHS)
    parser.add_argument("--all-languages", action="store_true")
    args = parser.parse_args()
    from app.ml.builtin import ensure_builtin_model

    print(
        "| pairs | answers | language | mean answer chars | exact, trained questions "
        "| held out | wall s | epochs | tokens trained |\n"
        "|---:|---|---|---:|---:|---:|---:|---:|---:|",
        flush=True,
    )
    rotation = itertools.cycle(LANGUAGES)
    with tempfile.TemporaryDirectory(prefix="qatune-quality-") as tmp:
        model_cache = Path(tmp) / "models"
        ensure_builtin_model(model_cache)
        for size, length in itertools.product(args.sizes, args.lengths):
            languages = LANGUAGES if args.all_languages else [next(rotation)]
            for language in languages:
                pairs = faq(size, length, language)
                scratch = Path(tempfile.mkdtemp(dir=tmp))
                metrics, wall = run_set(pairs, scratch, model_cache)
                kept = held_out(scratch / "adapter", size)
                trained = [p for i, p in enumerate(pairs) if i not in kept]
                right = exact_answers(scratch / "adapter", model_cache, trained)
                chars = sum(len(p["answer"]) for p in pairs) / len(pairs)
                print(
                    f"| {size} | {length} | {language} | {chars:.0f} | "
                    f"{right}/{len(trained)} ({right / len(trained):.0%}) | {len(kept)} | "
                    f"{wall:.0f} | {metrics['epochs']:g} | {metrics['train_tokens']:,} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
