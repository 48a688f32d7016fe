from typing import Any

import pytest

from app.ml.planner import MemoryPlan, plan_memory
from app.ml.shapes import KNOWN_SHAPES, ModelShape

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
    rows = min(8 * 120 / 2, 512)  # half of the longest step's tokens are answers
    assert dpo.breakdown_gb["logits"] == round(rows * QWEN_05B.vocab_size * 16 / 2**30, 3)
    assert dpo.estimated_peak_gb - supervised.estimated_peak_gb > 1.0


def test_activations_are_planned_for_the_longest_step_up_to_the_micro_batch_limit() -> None:
    """The micro-batch limit has a row of slack: a step that cannot fill it holds the
    activations of its own tokens, at most its batch_size longest examples
    (bench/rss_by_phase.py: planned for the limit, fp32 plans were 31-40% high)."""
    even = plan()  # 100 x 120 tokens: the longest step is 960 tokens
    assert even.micro_batch_tokens == 1280
    skewed = plan(lengths=[100] * 92 + [300] * 8)  # the longest step: 2,400 tokens
    assert skewed.micro_batch_tokens == 1500
    ratio = even.breakdown_gb["activations"] / skewed.breakdown_gb["activations"]
    assert ratio == pytest.approx(960 / 1500, rel=0.01)


def test_a_prefix_every_example_shares_is_planned_once_a_micro_batch() -> None:
    """A flat micro-batch holds the chat template's shared system prompt once
    (data.collate_flat): 8 examples of 120 tokens that share 40 are 680 tokens, not 960."""
    alone, shared = plan(), plan(shared_prefix=40)
    ratio = shared.breakdown_gb["activations"] / alone.breakdown_gb["activations"]
    assert ratio == pytest.approx(680 / 960, rel=0.01)


def test_checkpointing_on_the_cpu_plans_what_the_heap_keeps_of_the_recompute() -> None:
    """glibc's heap keeps freed pieces of the recomputed layers (bench/rss_by_phase.py): on
    the CPU a checkpointed step is planned to hold 0.4 of a full step's activations more
    than on CUDA, whose caching allocator reuses them."""
    full = plan(gradient_checkpointing=False).breakdown_gb["activations"]
    cpu = plan(gradient_checkpointing=True).breakdown_gb["activations"]
    cuda = plan(gradient_checkpointing=True, device="cuda").breakdown_gb["activations"]
    assert cuda < cpu < full
    assert cpu - cuda == pytest.approx(0.4 * full, abs=0.002)


def test_a_job_is_planned_for_the_longest_step_its_shuffles_are_likely_to_bring() -> None:
    """Each epoch reshuffles: over more steps a longer step comes up, never longer than the
    batch_size longest examples together (the bound when the steps are not known)."""
    from app.ml.activations import largest_step_tokens

    lengths = [60 + (i * 37) % 100 for i in range(64)]  # 60-159 tokens
    worst = sum(sorted(lengths)[-8:])
    short, long = largest_step_tokens(lengths, 8, 2), largest_step_tokens(lengths, 8, 300)
    assert 8 * sum(lengths) / 64 < short < long < worst
    assert largest_step_tokens(lengths, 8, 0) == worst
    assert largest_step_tokens(lengths, 8, 10**9) == worst
    assert largest_step_tokens([100] * 64, 8, 300, shared_prefix=20) == 800 - 7 * 20


def test_an_8bit_base_plans_the_activations_of_peft_s_unfused_path() -> None:
    """8-bit layers keep peft's forward (LLM.int8 quantizes the activations too), which held
    1.5x the fused path's activations on the 0.5B shape (bench/rss_by_phase.py)."""
    fused = plan(quantization="4bit").breakdown_gb["activations"]
    assert plan(quantization="8bit").breakdown_gb["activations"] == pytest.approx(
        1.5 * fused, abs=0.002
    )
    assert plan().breakdown_gb["activations"] == fused


def test_a_checkpointed_8bit_base_plans_its_unfused_layer_and_the_fused_path_s_heap() -> None:
    """Checkpointed (reentrant for an 8-bit base: model_setup.enable_checkpointing), an
    8-bit step keeps the layer inputs and one recomputed layer of peft's unfused path; what
    glibc's heap keeps of the recompute on the CPU is the fused path's share (the 0.5B
    shape's 8-bit loop: 2.55 GiB, planned 2.62)."""
    h, i = QWEN_05B.hidden_size, QWEN_05B.intermediate_size
    for device in ("cpu", "cuda"):
        args: dict[str, Any] = {"device": device, "gradient_checkpointing": True}
        fused = plan(quantization="4bit", **args).breakdown_gb["activations"]
        eight = plan(quantization="8bit", **args).breakdown_gb["activations"]
        kept_fused = QWEN_05B.num_layers * (h + 0.4 * (device == "cpu") * (14 * h + 4 * i))
        kept_fused += 14 * h + 4 * i
        extra = 0.5 * (14 * h + 4 * i)  # the recomputed layer, unfused
        assert eight - fused == pytest.approx(fused * extra / kept_fused, rel=0.02)


def test_packed_attention_keeps_a_copy_of_the_prefix_and_short_examples_probabilities() -> None:
    """varlen_attention puts the shared prefix's queries, keys and values in front of each
    example; on the CPU an example under 192 keys takes math attention, which keeps its
    probabilities, and in bf16 attention runs in fp32 on fp32 copies. SmolLM2's 30-token
    system prompt before 21-token examples: 16 KB a token and layer in bf16 on the CPU,
    5.5 KB on CUDA (prefix copies alone), against the per-token activations' 28.4."""
    from app.ml.activations import attention_bytes_per_token

    smollm2 = ModelShape(576, 1536, 30, 9, 3, 49152)
    q_and_kv = 576 + 2 * 192

    def per_layer(lengths: list[int], prefix: int, precision: str, device: str) -> float:
        return attention_bytes_per_token(smollm2, lengths, prefix, precision, device, False) / 30

    prefix_copies = 30 * q_and_kv * 4 / 21
    own_copies = (2 * 576 + 2 * 192) * 4
    probabilities = 9 * 51 * 51 * 4 / 21
    cpu = per_layer([51] * 64, 30, "bf16", "cpu")
    assert cpu == pytest.approx(prefix_copies + own_copies + probabilities, rel=0.001)
    assert per_layer([51] * 64, 30, "bf16", "cuda") == pytest.approx(30 * q_and_kv * 2 / 21)
    long = per_layer([430] * 64, 30, "bf16", "cpu")  # flash attention: no probabilities
    assert long == pytest.approx(30 * q_and_kv * 4 / 400 + own_copies, rel=0.001)
    assert per_layer([51] * 64, 0, "bf16", "cuda") == 0
    checkpointed = attention_bytes_per_token(smollm2, [51] * 64, 30, "bf16", "cpu", True)
    assert checkpointed == pytest.approx(cpu)  # one layer's at a time


def test_bf16_on_the_cpu_plans_what_its_kernels_hold_beside_the_runtime() -> None:
    """A CPU job in bf16 held 0.15-0.22 GiB over its plan whatever its size (fp32 within
    5% on the same machine): the plan counts it, on the CPU in bf16 only."""
    from app.ml.planner import CPU_BF16_RUNTIME_EXTRA_GB, RUNTIME_OVERHEAD_GB

    assert plan(precision="bf16").breakdown_gb["runtime"] == pytest.approx(
        RUNTIME_OVERHEAD_GB["cpu"] + CPU_BF16_RUNTIME_EXTRA_GB, abs=0.001
    )
    assert plan(precision="fp32").breakdown_gb["runtime"] == RUNTIME_OVERHEAD_GB["cpu"]
    cuda = plan(precision="bf16", device="cuda").breakdown_gb["runtime"]
    assert cuda == RUNTIME_OVERHEAD_GB["cuda"]
