"""A quantized base: what each device can train with, and what "auto" plans."""

import pytest

from app.core.language import said
from app.ml.device import PrecisionDecision
from app.ml.hyperparameters import DataFacts, HyperparameterRequest
from app.ml.models import Recommended
from app.ml.planner import TrainingPlan, plan_training
from app.ml.quantization import (
    QUANTIZED,
    QuantizationSupport,
    QuantizationUnavailable,
    base_weight_bytes,
    support_for,
)
from app.ml.shapes import KNOWN_SHAPES

FAQ = DataFacts(lengths=(120,) * 40, answer_lengths=(60,) * 40)  # 40 pairs of 120 tokens


def plan(
    model: str,
    quantizations: tuple[str, ...] = QUANTIZED,
    budget_gb: float = 14.4,
    **asked: object,
) -> TrainingPlan:
    return plan_training(
        HyperparameterRequest.model_validate(asked),
        data=FAQ,
        shape=KNOWN_SHAPES[model],
        recommended=Recommended(),
        device="mps",
        precision=PrecisionDecision("fp16", True, said("fp16 on MPS")),
        budget_gb=budget_gb,
        budget_reason="90% of 16 GB",
        quantizations=quantizations,  # type: ignore[arg-type]
    )


def test_each_device_can_train_a_quantized_base_with_bitsandbytes_050() -> None:
    for device in ("cuda", "cpu", "mps"):
        assert support_for(device, torch_version=(2, 13), library=(0, 50)).kinds == QUANTIZED
    absent = support_for("cpu", torch_version=(2, 13), library=None)
    assert absent.kinds == () and "pip install 'bitsandbytes>=0.50'" in str(absent.why_not)
    old = support_for("cuda", torch_version=(2, 13), library=(0, 45))
    assert old.kinds == () and "0.45 is too old" in str(old.why_not)
    old_torch = support_for("mps", torch_version=(2, 8), library=(0, 50))
    assert old_torch.kinds == () and "torch ≥ 2.9" in str(old_torch.why_not)


def test_a_quantization_that_cannot_be_had_is_refused_with_what_to_choose() -> None:
    absent = support_for("mps", torch_version=(2, 13), library=None)
    with pytest.raises(QuantizationUnavailable, match="4bit is not available on mps.*pip install"):
        absent.check("4bit", device="mps")
    absent.check("auto", device="mps")  # auto quantizes only where it can
    absent.check("none", device="mps")
    present = QuantizationSupport(QUANTIZED)
    with pytest.raises(QuantizationUnavailable, match="2 processes together.*processes to 1"):
        asked = HyperparameterRequest(quantization="8bit", processes=2)
        present.check(asked.quantization, device="cuda", processes=asked.process_count)
    asked = HyperparameterRequest(quantization="8bit")
    present.check(asked.quantization, device="cuda", processes=asked.process_count)


def test_quantized_weights_take_a_quarter_to_an_eighth_of_fp32() -> None:
    linear, other = 1_000_000, 1000
    fp32 = base_weight_bytes(linear, other, 4, "none")
    assert fp32 == 4 * (linear + other)
    assert base_weight_bytes(linear, other, 4, "8bit") == pytest.approx(fp32 / 4, rel=0.01)
    # NF4 with double quantization: ~4.13 bits a weight
    assert base_weight_bytes(linear, other, 4, "4bit") == pytest.approx(fp32 / 7.75, rel=0.01)


def test_auto_keeps_the_base_as_stored_when_it_fits() -> None:
    small = plan("Qwen/Qwen2.5-0.5B-Instruct")
    assert small.memory.fits and small.memory.quantization == "none"
    assert small.hyperparameters.quantization == "none"
    assert not any("base in" in reason for reason in small.memory.reasons)


def test_auto_quantizes_a_7b_model_for_a_16gb_mac_before_cutting_the_micro_batch() -> None:
    unquantized = plan("Qwen/Qwen2.5-7B-Instruct", quantizations=())
    assert not unquantized.memory.fits  # 15.8 GB against 14.4: refused, as before
    assert "a 4-bit base (quantization 4bit)" in unquantized.memory.refusal().english()

    quantized = plan("Qwen/Qwen2.5-7B-Instruct")
    assert quantized.memory.fits and quantized.memory.quantization == "4bit"
    assert quantized.hyperparameters.quantization == "4bit"  # what the job records
    why = quantized.memory.reasons[1]
    assert why.startswith("base in 4-bit (NF4): as stored (fp16) needs 15.8 GB; 8-bit")
    assert "before cutting the micro-batch" in why
    assert quantized.memory.breakdown_gb["weights"] < 5.5  # ~7.6B weights at ~4.1 bits
    assert "dequantization" in quantized.memory.breakdown_gb

    # With room for 8-bit at the full micro-batch, 8-bit it is: it loses less.
    roomy = plan("Qwen/Qwen2.5-7B-Instruct", budget_gb=22)  # peft's path: 20.5 GB
    assert roomy.memory.quantization == "8bit" and not roomy.memory.cut_to_fit


def test_a_quantization_asked_for_is_planned_as_asked() -> None:
    asked = plan("Qwen/Qwen2.5-0.5B-Instruct", quantization="8bit")
    assert asked.memory.quantization == "8bit" and asked.hyperparameters.quantization == "8bit"
    assert "base in 8-bit: requested" in asked.memory.reasons
    assert "8-bit base" in asked.memory.summary().english()
    kept = plan("Qwen/Qwen2.5-7B-Instruct", quantization="none")
    assert not kept.memory.fits and kept.memory.quantization == "none"


@pytest.mark.parametrize(
    ("name", "billions"),
    [
        ("Qwen/Qwen2.5-0.5B-Instruct", 0.49),
        ("Qwen/Qwen2.5-7B-Instruct", 7.62),
        ("Qwen/Qwen2.5-72B-Instruct", 72.7),
        ("Qwen/Qwen3-0.6B", 0.60),
        ("Qwen/Qwen3-8B", 8.19),
        ("meta-llama/Llama-3.2-1B-Instruct", 1.24),
        ("meta-llama/Llama-3.1-8B-Instruct", 8.03),
        ("meta-llama/Llama-3.3-70B-Instruct", 70.6),
        ("mistralai/Mistral-7B-Instruct-v0.3", 7.25),
        ("google/gemma-2-9b-it", 9.24),
        ("google/gemma-3-1b-it", 1.00),
        ("microsoft/Phi-3-mini-4k-instruct", 3.82),
        ("microsoft/phi-4", 14.7),
    ],
)
def test_the_known_shapes_have_the_sizes_the_models_are_known_by(
    name: str, billions: float
) -> None:
    assert KNOWN_SHAPES[name].num_params / 1e9 == pytest.approx(billions, rel=0.01)


def test_base_model_names_share_their_instruct_models_shape() -> None:
    assert KNOWN_SHAPES["Qwen/Qwen2.5-7B"] == KNOWN_SHAPES["Qwen/Qwen2.5-7B-Instruct"]
    assert KNOWN_SHAPES["google/gemma-2-9b"] == KNOWN_SHAPES["google/gemma-2-9b-it"]
    assert KNOWN_SHAPES["Qwen/Qwen3-8B-Base"] == KNOWN_SHAPES["Qwen/Qwen3-8B"]
