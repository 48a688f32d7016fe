import pytest

from app.ml.device import (
    BenchmarkRun,
    Capabilities,
    DeviceBenchmark,
    DeviceUnavailable,
    plan_device,
    select_device,
    select_precision,
)

CPU = Capabilities(torch_version=(2, 13), cpu_bf16=True, cpu_count=2, ram_total_gb=24)
CPU_NO_BF16 = Capabilities(torch_version=(2, 13), cpu_bf16=False)
CUDA_AMPERE = Capabilities(
    torch_version=(2, 13), cuda_available=True, cuda_name="A100", cuda_bf16=True, cuda_memory_gb=80
)
CUDA_TURING = Capabilities(
    torch_version=(2, 13), cuda_available=True, cuda_name="T4", cuda_bf16=False, cuda_memory_gb=16
)
M1 = Capabilities(
    torch_version=(2, 13),
    mps_built=True,
    mps_available=True,
    macos_version=(14, 5),
    apple_chip="Apple M1 Pro",
)
M3 = Capabilities(
    torch_version=(2, 13),
    mps_built=True,
    mps_available=True,
    macos_version=(15, 1),
    apple_chip="Apple M3 Max",
)
M3_OLD_MACOS = Capabilities(
    torch_version=(2, 13),
    mps_built=True,
    mps_available=True,
    macos_version=(13, 6),
    apple_chip="Apple M3",
)


def test_priority_is_cuda_then_mps_then_cpu() -> None:
    both = Capabilities(torch_version=(2, 13), cuda_available=True, mps_available=True)
    assert select_device(both).device == "cuda"
    assert select_device(M1).device == "mps"
    assert select_device(CPU).device == "cpu"


def test_override_and_absent_device() -> None:
    assert select_device(CUDA_AMPERE, "cpu").device == "cpu"
    with pytest.raises(DeviceUnavailable, match="QATUNE_DEVICE=cuda"):
        select_device(CPU, "cuda")
    with pytest.raises(DeviceUnavailable, match="MPS is not available"):
        select_device(CPU, "mps")


def test_a_recorded_benchmark_winner_is_used_when_present() -> None:
    decision = select_device(M1, "auto", benchmark_winner="cpu")
    assert decision.device == "cpu" and "benchmark" in decision.reasons[0].english()
    assert select_device(CPU, "auto", benchmark_winner="mps").device == "cpu"  # absent: ignored


def benchmark(winner: str) -> DeviceBenchmark:
    run = BenchmarkRun(tokens_per_second=1000.0, precision="bf16", seconds=3.0)
    return DeviceBenchmark("builtin:tiny", winner, {"cpu": run}, 6, "2026-11-22T00:00:00+00:00")  # type: ignore[arg-type]


def test_the_device_plan_follows_the_benchmark_and_says_why() -> None:
    plan = plan_device(CUDA_AMPERE, "auto", benchmark("cpu"))
    assert (plan.device, plan.precision) == ("cpu", "fp32")  # this CUDA host's CPU has no bf16
    assert "benchmark" in plan.reasons[0].english() and plan.benchmark is not None
    assert plan.memory_budget_gb == 0.0 and "RAM" in plan.budget_reason.english()
    # QATUNE_DEVICE wins over a benchmark; without one, the priority order decides.
    assert plan_device(CUDA_AMPERE, "cuda", benchmark("cpu")).device == "cuda"
    cuda = plan_device(CUDA_AMPERE)
    assert (cuda.device, cuda.precision, cuda.memory_budget_gb) == ("cuda", "bf16", 72.0)


def test_a_jobs_own_precision_is_checked_against_the_plan() -> None:
    plan = plan_device(CPU, "cpu")
    assert plan.precision_for("auto").precision == "bf16"
    assert plan.precision_for("fp32").precision == "fp32"
    with pytest.raises(ValueError, match="emulated"):
        plan_device(CPU_NO_BF16).precision_for("bf16")


@pytest.mark.parametrize(
    ("caps", "device", "precision", "scaling"),
    [
        (CUDA_AMPERE, "cuda", "bf16", False),
        (CUDA_TURING, "cuda", "fp16", True),
        (M3, "mps", "bf16", False),
        (M1, "mps", "fp16", True),  # bf16 is emulated on M1/M2
        (M3_OLD_MACOS, "mps", "fp16", True),  # bf16 on MPS needs macOS 14
        (CPU, "cpu", "bf16", False),
        (CPU_NO_BF16, "cpu", "fp32", False),
    ],
)
def test_precision_policy(caps: Capabilities, device: str, precision: str, scaling: bool) -> None:
    decision = select_precision(caps, device)  # type: ignore[arg-type]
    assert (decision.precision, decision.loss_scaling) == (precision, scaling)
    assert decision.reason


def test_old_torch_on_mps_trains_in_fp32() -> None:
    old = Capabilities(torch_version=(2, 4), mps_available=True, macos_version=(14, 0))
    assert select_precision(old, "mps").precision == "fp32"


def test_requested_precision_that_would_be_emulated_is_refused() -> None:
    with pytest.raises(ValueError, match="emulated"):
        select_precision(CPU_NO_BF16, "cpu", "bf16")
    with pytest.raises(ValueError, match="fp16"):
        select_precision(CUDA_TURING, "cuda", "bf16")
    assert select_precision(CPU, "cpu", "fp32").precision == "fp32"
