"""Batched greedy decoding: the same answers as one at a time, and rows that cannot match
stop early."""

from pathlib import Path

import torch

from app.ml.builtin import ensure_builtin_model
from app.ml.models import load_causal_lm, load_tokenizer
from app.ml.pairs import QAPair
from app.ml.training.adapter_metadata import AdapterMetadata, answer_budget
from bench.reference_answers import Diverged, generate_answers

QUESTIONS = ["What is the code for the east door?", "Who signs the book?", "Floor?"]


def test_batched_answers_equal_one_at_a_time_and_wrong_rows_stop(model_cache: Path) -> None:
    directory = ensure_builtin_model(model_cache)
    model = load_causal_lm(directory, dtype=torch.float32, device="cpu").eval()
    tokenizer = load_tokenizer(directory)
    conversations = [QAPair(q, "").prompt_messages() for q in QUESTIONS]
    one_by_one = [
        generate_answers(model, tokenizer, [c], device="cpu", max_new_tokens=40)[0]
        for c in conversations
    ]
    batched = generate_answers(model, tokenizer, conversations, device="cpu", max_new_tokens=40)
    assert batched == one_by_one  # left padding changes nothing (fp32)


def test_a_row_stops_once_it_has_left_its_reference_and_shown_enough() -> None:
    stop = Diverged(width=2, expected=[[1, 2, 3, 4], [1, 2, 3], [5, 6]], keep=3)
    generated = torch.tensor(
        [
            [0, 0, 1, 2, 3],  # still its reference: goes on
            [0, 0, 1, 9, 3],  # left it, three shown: stops
            [0, 0, 5, 6, 7],  # longer than its reference: cannot match, stops
        ]
    )
    assert stop(generated, None).tolist() == [False, True, True]
    assert Diverged(width=2, expected=[[1, 2, 3]], keep=4)(generated[1:2], None).tolist() == [
        False  # wrong, but fewer than `keep` tokens shown yet
    ]


def test_the_answer_budget_fits_the_adapters_answers() -> None:
    assert answer_budget(None) == 256  # no adapter: the usual default
    assert answer_budget(AdapterMetadata("builtin:tiny", longest_answer_tokens=100)) == 256
    assert answer_budget(AdapterMetadata("builtin:tiny", longest_answer_tokens=600)) == 1200
    assert answer_budget(AdapterMetadata("builtin:tiny", longest_answer_tokens=5000)) == 2048
