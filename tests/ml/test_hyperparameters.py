"""Resolving "auto": one function for the trainer and the estimates."""

from typing import Any

import pytest
from pydantic import ValidationError

from app.ml.hyperparameters import (
    DataFacts,
    HyperparameterRequest,
    ResolvedHyperparameters,
    resolve,
    validation_size,
)
from app.ml.models import Recommended
from app.ml.planner import longest_steps, total_steps


def resolved(
    lengths: list[int], answers: int = 0, per_rank: int = 0, **asked: Any
) -> ResolvedHyperparameters:
    """`answers` tokens in each answer, `per_rank` adapter parameters per unit of rank."""
    return resolve(
        HyperparameterRequest.model_validate(asked),
        data=DataFacts(lengths=tuple(lengths), answer_lengths=(answers,) * len(lengths)),
        max_positions=2048,
        recommended=Recommended(learning_rate=3e-3, lora_r=16, examples_seen=600),
        lora_params_per_rank=per_rank,
    )


def test_a_cap_is_raised_to_twice_itself_at_most_and_never_past_what_was_asked() -> None:
    """Auto epochs may go past their cap while still learning (until_learned.py): to
    twice it, never past 100 epochs, a `max_steps` asked for, or a fixed epoch count."""
    large = resolved([40] * 1000)  # 125 steps an epoch, capped at 30 epochs
    assert total_steps(large, 1000) == 30 * 125 and longest_steps(large, 1000) == 60 * 125
    small = resolved([40] * 30)  # 80 epochs: raised to 100 at most
    assert longest_steps(small, 30) == 100 * 4
    single = resolved([40])  # capped at 100 epochs already
    assert longest_steps(single, 1) == total_steps(single, 1) == 100
    asked = resolved([40] * 1000, max_steps=5000)
    assert total_steps(asked, 1000) == 3750 and longest_steps(asked, 1000) == 5000
    fixed = resolved([40] * 1000, epochs=20)
    assert longest_steps(fixed, 1000) == total_steps(fixed, 1000)


def test_auto_follows_the_data_and_the_models_recommendations() -> None:
    small = resolved([40] * 30)
    # auto epochs: until every answer is learned, capped at 4x what a set this size needs
    assert small.until_learned and small.epochs == 80
    assert small.batch_size == 8 and small.validation_split == 0
    assert (small.learning_rate, small.lora_r, small.lora_alpha) == (3e-3, 16, 32)
    assert small.max_seq_length == 40 and small.micro_batch_size is None
    large = resolved([40] * 1000)
    assert large.epochs == 30  # never under 30
    # every pair taught: a held-out answer would never be learned
    assert large.validation_split == 0
    fixed = resolved([40] * 1000, epochs=20)
    assert not fixed.until_learned  # asked for: exactly that
    assert fixed.validation_split == 0.1  # its best epoch kept by the held-out pairs


def test_asked_values_win_and_are_bounded_by_the_model() -> None:
    params = resolved([5000] * 10, epochs=2, batch_size=4, lora_r=4, max_seq_length=4096)
    assert (params.epochs, params.batch_size, params.lora_alpha) == (2, 4, 8)
    assert params.max_seq_length == 2048  # the model's positions, not the request
    assert resolved([40] * 3, batch_size=16).batch_size == 3  # no more than the examples


def test_the_rank_grows_with_the_answers_to_learn_and_the_rate_follows_it() -> None:
    per_rank = 19_456  # builtin:tiny, every linear layer
    # 290 long answers: r16's 311k parameters hold 3 a token; 300 need r32
    assert resolved([400] * 290, answers=350, per_rank=per_rank).lora_r == 16
    assert resolved([400] * 300, answers=350, per_rank=per_rank).lora_r == 32
    big = resolved([400] * 3000, answers=350, per_rank=per_rank)  # 945k tokens: 2.8M params
    assert (big.lora_r, big.lora_alpha) == (256, 512)
    assert big.learning_rate == pytest.approx(3e-3 * (16 / 256) ** 0.5)
    assert resolved([400] * 580, answers=350, per_rank=per_rank).lora_r == 32
    # Asked-for values win; an asked rank keeps its rate scaled, unless alpha is asked too
    assert resolved([400] * 3000, answers=350, per_rank=per_rank, lora_r=8).lora_r == 8
    assert resolved([40] * 30, lora_r=4).learning_rate == pytest.approx(6e-3)
    assert resolved([40] * 30, lora_r=4, lora_alpha=8).learning_rate == 3e-3
    assert resolved([40] * 30, lora_r=64, learning_rate=1e-3).learning_rate == 1e-3


def test_the_micro_batch_is_its_own_setting() -> None:
    params = resolved([40] * 100, micro_batch_size=16)
    assert (params.batch_size, params.micro_batch_size) == (16, 16)


def test_one_vocabulary_unknown_names_are_refused() -> None:
    with pytest.raises(ValidationError, match="gradient_accumulation_steps"):
        HyperparameterRequest.model_validate({"gradient_accumulation_steps": 4})
    with pytest.raises(ValidationError, match="effective_batch_size"):
        HyperparameterRequest.model_validate({"effective_batch_size": 8})


@pytest.mark.parametrize(
    ("pairs", "fraction", "held_out"), [(1, 0.5, 0), (10, 0.0, 0), (10, 0.05, 1), (100, 0.1, 10)]
)
def test_validation_size(pairs: int, fraction: float, held_out: int) -> None:
    assert validation_size(pairs, fraction) == held_out
