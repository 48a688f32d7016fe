from typing import Any

from app.ml.planner import MemoryPlan, plan_memory
from app.ml.shapes import KNOWN_SHAPES

QWEN_05B = KNOWN_SHAPES["Qwen/Qwen2.5-0.5B-Instruct"]
QWEN_7B = KNOWN_SHAPES["Qwen/Qwen2.5-7B-Instruct"]


def plan(**overrides: Any) -> MemoryPlan:
    args: dict[str, Any] = {
        "shape": QWEN_05B,
        "precision": "bf16",
        "lora_r": 8,
        "lengths": [120] * 100,
        "batch_size": 8,
        "micro_batch_size": None,
        "device": "cpu",
        "budget_gb": 16.0,
        "budget_reason": "80% of the RAM available at start",
    }
    return plan_memory(**(args | overrides))


def test_parameter_count_of_known_shapes() -> None:
    assert 0.45e9 < QWEN_05B.num_params < 0.55e9
    assert 7.0e9 < QWEN_7B.num_params < 7.8e9


def test_small_model_fits_in_one_micro_batch_without_checkpointing() -> None:
    result = plan()
    assert result.fits and not result.gradient_checkpointing
    assert result.gradient_accumulation_steps == 1


def test_tight_budget_cuts_the_micro_batch_then_checkpoints() -> None:
    long = [1024] * 100
    whole = plan(budget_gb=100.0, lengths=long)
    assert whole.micro_batch_tokens >= 8 * 1024 and not whole.gradient_checkpointing
    tight = plan(budget_gb=whole.estimated_peak_gb * 0.8, lengths=long)
    assert tight.fits and not tight.gradient_checkpointing
    assert tight.micro_batch_tokens < 8 * 1024
    assert tight.gradient_accumulation_steps > 1
    one_row = plan(budget_gb=100.0, lengths=long, micro_batch_size=1)
    tighter = plan(budget_gb=one_row.estimated_peak_gb * 0.9, lengths=long)
    assert tighter.fits and tighter.gradient_checkpointing


def test_a_model_that_cannot_fit_says_what_would() -> None:
    result = plan(shape=QWEN_7B, budget_gb=8.0, device="mps")
    assert not result.fits
    assert "smaller base model" in result.refusal().english()


def test_dpo_and_grpo_plan_the_fp32_logits_of_their_token_log_probabilities() -> None:
    """They score answer tokens with a vocabulary's logits for up to 512 tokens at once, in
    fp32 with their log-softmax and both gradients (answer_loss.py), not the fused head's
    small chunk: on Qwen's 151,936-token head that is ~1.2 GB more (bench/planner_accuracy.py
    --dpo measured the difference on two shapes within 15%)."""
    supervised, dpo = plan(), plan(token_logps=True)
    rows = min(supervised.micro_batch_tokens / 2, 512)
    assert dpo.breakdown_gb["logits"] == round(rows * QWEN_05B.vocab_size * 16 / 2**30, 3)
    assert dpo.estimated_peak_gb - supervised.estimated_peak_gb > 1.0
