"""The answer table through the serving engine: the answers transformers' `generate` gives,
the base model's answers kept for the next job, and a time limit that cuts rows short."""

from pathlib import Path
from typing import Any

import pytest
import torch

from app.ml.builtin import BUILTIN_TINY, ensure_builtin_model
from app.ml.data import encode_pair
from app.ml.models import load_causal_lm, load_tokenizer
from app.ml.pairs import QAPair
from app.ml.training.base_answers import BaseAnswers
from app.ml.training.evaluation import KEEP_WRONG_TOKENS, TableModel, answer_table
from bench.adapters import random_adapter
from bench.reference_answers import generate_answers

PAIRS = [
    QAPair("What is the code for the east door?", "4417, then press the bell twice."),
    QAPair("Who signs the book?", "The duty officer, every evening at six."),
    QAPair("Floor?", "Third."),
    QAPair("Where do visitors park their cars on weekends?", "Behind the library " * 6),
    QAPair("早上几点开门？", "早上八点。"),
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_builtin_model(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def adapter_dir(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("adapters") / "tuned"
    return random_adapter(model_dir, target, base_model=BUILTIN_TINY, seed=3, rank=8)


def table_model(model_dir: Path, adapter_dir: Path) -> TableModel:
    from peft import PeftModel

    def weights(merged: bool) -> Any:
        model = load_causal_lm(model_dir, dtype=torch.float32, device="cpu")
        if merged:
            model = PeftModel.from_pretrained(model, adapter_dir).merge_and_unload()
        return model.eval()

    return TableModel(weights, load_tokenizer(model_dir), BUILTIN_TINY, adapter_dir, "cpu", "fp32")


def generate_reference(model_dir: Path, adapter_dir: Path) -> tuple[list[str], list[str]]:
    """The table as transformers' `generate` decodes it: tuned answers, then base ones."""
    from peft import PeftModel

    tokenizer = load_tokenizer(model_dir)
    base = load_causal_lm(model_dir, dtype=torch.float32, device="cpu")
    model = PeftModel.from_pretrained(base, adapter_dir).eval()
    expected = [e.input_ids[e.prompt_len :] for e in (encode_pair(tokenizer, p) for p in PAIRS)]
    options: dict[str, Any] = {
        "device": "cpu",
        # Every row ends by then: at its end of turn, or once it has left its reference.
        "max_new_tokens": max(KEEP_WRONG_TOKENS, *(len(e) + 1 for e in expected)),
        "expected": expected,
        "keep_wrong_tokens": KEEP_WRONG_TOKENS,
    }
    conversations = [p.prompt_messages() for p in PAIRS]
    tuned = generate_answers(model, tokenizer, conversations, **options)
    with model.disable_adapter():
        base_answers = generate_answers(model, tokenizer, conversations, **options)
    return [t.strip() for t in tuned], [b.strip() for b in base_answers]


def test_the_table_answers_as_generate_does_and_the_next_job_reuses_the_base_answers(
    model_dir: Path, adapter_dir: Path, tmp_path: Path
) -> None:
    tuned, base = generate_reference(model_dir, adapter_dir)
    assert tuned != base  # the adapter changes the answers: both paths are exercised
    answers = BaseAnswers(tmp_path / "answers", model_dir, device="cpu", precision="fp32")

    first = answer_table(
        table_model(model_dir, adapter_dir), PAIRS, split="validation", base_answers=answers
    )
    assert [r.tuned for r in first.rows] == tuned  # tuned and base rows in one stacked batch
    assert [r.base for r in first.rows] == base
    assert (first.base_reused, first.unfinished) == (0, 0)
    assert len(answers.read()) == len(PAIRS)

    again = answer_table(
        table_model(model_dir, adapter_dir), PAIRS, split="validation", base_answers=answers
    )
    assert again.base_reused == len(PAIRS)  # no base row decoded: the adapter ran merged
    assert again.rows == first.rows

    other = BaseAnswers(tmp_path / "answers", model_dir, device="cpu", precision="bf16")
    assert other.read() == {}  # another precision answers differently: its own file


def test_a_table_past_its_time_limit_shows_what_it_has_and_keeps_none_of_it(
    model_dir: Path, adapter_dir: Path, tmp_path: Path
) -> None:
    answers = BaseAnswers(tmp_path / "answers", model_dir, device="cpu", precision="fp32")
    report = answer_table(
        table_model(model_dir, adapter_dir),
        PAIRS,
        split="validation",
        base_answers=answers,
        time_limit_s=0.0,
    )
    assert report.questions == len(PAIRS)
    assert report.unfinished == 2 * len(PAIRS)  # every tuned and base row was cut short
    assert answers.read() == {}  # a cut answer is not the base model's answer: not kept
