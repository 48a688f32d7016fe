"""Where an adapter's scope sends questions, fitted on two outside sets side by side.

    python -m bench.scope_routing

For each FAQ of bench/data, on SmolLM2-135M-Instruct's own features (the scope is fitted
on the base's, app/ml/scope.py), one scope is fitted with qatune's general prompts alone
outside (REPLAY, as before) and one with its small talk too (`outside_of`, today's), each
on the FAQ's questions and word-dropped copies inside. Counted inside each: the trained
questions and their rewordings (should be inside: the adapter answers them), the
benchmark's general questions and 30 short messages a help desk gets (bench/data/
small_talk.json, not those fitted on: should be outside, the base answers them). No
training: the scope is fitted on the base, so only where questions go is measured; what
the adapter answers there is `bench.quality_real`'s.
"""

import json
import random

import torch

from app.ml.general_prompts import REPLAY
from app.ml.models import load_causal_lm, load_tokenizer
from app.ml.scope import COPIES, Scope, features, fit, outside_of, with_words_dropped
from app.ml.serving.asking import question_ids
from bench.quality_real import DATA, faq, general
from bench.real_model import device_precision, real_model_dir

SETS = ("library", "staff", "product")


def main() -> None:
    directory = real_model_dir()
    tokenizer = load_tokenizer(directory)
    dtype = torch.bfloat16 if device_precision() == "bf16" else torch.float32
    model = load_causal_lm(directory, dtype=dtype, device="cpu")
    seen: dict[str, torch.Tensor] = {}

    def rows(texts: list[str]) -> torch.Tensor:
        new = [t for t in dict.fromkeys(texts) if t not in seen]
        if new:
            made = features(model, [question_ids(tokenizer, t) for t in new], "cpu")
            seen.update(zip(new, made, strict=True))
        return torch.stack([seen[t] for t in texts])

    general_q = [g["question"] for g in general()]
    small_talk = json.loads((DATA / "small_talk.json").read_text())["messages"]
    print("| set | outside fitted on | trained inside | reworded inside | general inside "
          "| small talk inside |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|")
    for name in SETS:
        pairs = faq(name).pairs
        questions = [p["question"] for p in pairs]
        reworded = [r for p in pairs for r in p["reworded"]]
        rng = random.Random(0)
        copies = [with_words_dropped(q, rng) for q in questions for _ in range(COPIES)]
        inside = rows([*questions, *copies])
        for label, outside in (
            ("general prompts", [p for p in REPLAY if p not in questions]),
            ("general prompts and small talk", outside_of(questions)),
        ):
            scope = fit(inside, rows(outside))
            asked = (questions, reworded, general_q, small_talk)
            counts = [_inside(scope, rows(texts)) for texts in asked]
            print(f"| {name} | {label} | " + " | ".join(counts) + " |", flush=True)


def _inside(scope: Scope, features_: torch.Tensor) -> str:
    taken = scope.inside(features_)
    return f"{sum(taken)}/{len(taken)}"


if __name__ == "__main__":
    main()
