from app.ml.device import Capabilities
from app.ml.planner import KNOWN_SHAPES, plan_memory

CAPS = Capabilities(torch_version=(2, 13), ram_available_gb=20, ram_total_gb=24)
QWEN_05B = KNOWN_SHAPES["Qwen/Qwen2.5-0.5B-Instruct"]
QWEN_7B = KNOWN_SHAPES["Qwen/Qwen2.5-7B-Instruct"]


def plan(**overrides: object) -> object:
    args: dict[str, object] = dict(
        shape=QWEN_05B, precision="bf16", lora_r=8, lengths=[120] * 100, effective_batch=8,
        micro_batch_size=None, device="cpu", caps=CAPS,
    )  # fmt: skip
    args.update(overrides)
    return plan_memory(**args)  # type: ignore[arg-type]


def test_parameter_count_of_known_shapes() -> None:
    assert 0.45e9 < QWEN_05B.num_params < 0.55e9
    assert 7.0e9 < QWEN_7B.num_params < 7.8e9


def test_small_model_fits_in_one_micro_batch_without_checkpointing() -> None:
    result = plan()
    assert result.fits and not result.gradient_checkpointing  # type: ignore[attr-defined]
    assert result.gradient_accumulation_steps == 1  # type: ignore[attr-defined]


def test_tight_budget_cuts_the_micro_batch_then_checkpoints() -> None:
    roomy = plan(budget_gb=3.0)
    tight = plan(budget_gb=2.6, lengths=[1024] * 100)
    assert roomy.fits and tight.fits  # type: ignore[attr-defined]
    assert tight.micro_batch_tokens < 8 * 1024  # type: ignore[attr-defined]
    assert tight.gradient_accumulation_steps > 1  # type: ignore[attr-defined]


def test_a_model_that_cannot_fit_says_what_would() -> None:
    result = plan(shape=QWEN_7B, budget_gb=8.0, device="mps")
    assert not result.fits  # type: ignore[attr-defined]
    assert "smaller base model" in result.advice()  # type: ignore[attr-defined]
