"""Which device, precision and memory budget training and serving get here, and why.

`probe_capabilities` reads the machine into a plain value; `plan_device` turns it (with
QATUNE_DEVICE and a recorded benchmark) into the one `DevicePlan` a process uses: the API's
/system/device, the estimates, the worker's training spec, the trainer and the query
service all take it from there. Every function below the probe is pure, so every branch is
testable on a machine that has none of the hardware.
"""

import platform
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

import psutil

from app.core.language import Sentence, said, tr
from app.ml.quantization import QuantizationSupport, bitsandbytes_version, support_for

Device = Literal["cuda", "mps", "cpu"]
Precision = Literal["bf16", "fp16", "fp32"]
PRECISIONS: tuple[Precision, ...] = ("bf16", "fp16", "fp32")
GIB = 1024**3


class DeviceUnavailable(RuntimeError):
    """The configured device is not present on this machine."""


@dataclass(frozen=True)
class Capabilities:
    torch_version: tuple[int, int]
    cuda_available: bool = False
    cuda_name: str | None = None
    cuda_bf16: bool = False
    cuda_memory_gb: float | None = None
    cuda_count: int = 0  # CUDA GPUs visible to this process
    mps_built: bool = False
    mps_available: bool = False
    macos_version: tuple[int, int] | None = None
    apple_chip: str | None = None
    mps_recommended_memory_gb: float | None = None
    cpu_name: str = ""
    cpu_bf16: bool = False
    cpu_count: int = 1
    ram_total_gb: float = 0.0
    ram_available_gb: float = 0.0
    bitsandbytes: tuple[int, int] | None = None  # its version; None: not installed


@dataclass(frozen=True)
class DeviceDecision:
    device: Device
    reasons: tuple[Sentence, ...]


@dataclass(frozen=True)
class PrecisionDecision:
    precision: Precision
    loss_scaling: bool
    reason: Sentence


def _version_tuple(text: str) -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def _cpu_flags_and_name() -> tuple[set[str], str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set(), platform.processor()
    flags: set[str] = set()
    name = platform.processor()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("flags", "Features"):
            flags.update(value.split())
        elif key == "model name" and not name:
            name = value.strip()
    return flags, name


def _apple_chip() -> str | None:
    if platform.system() != "Darwin":
        return None
    try:
        out = subprocess.run(
            ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=5
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def probe_capabilities() -> Capabilities:
    import torch

    flags, cpu_name = _cpu_flags_and_name()
    memory = psutil.virtual_memory()
    cuda = torch.cuda.is_available()
    mps = torch.backends.mps
    mac = platform.mac_ver()[0]
    mps_available = mps.is_available()
    recommended = None
    if mps_available:
        recommended = torch.mps.recommended_max_memory() / GIB
    return Capabilities(
        torch_version=_version_tuple(torch.__version__),
        cuda_available=cuda,
        cuda_name=torch.cuda.get_device_name(0) if cuda else None,
        cuda_bf16=bool(cuda and torch.cuda.is_bf16_supported()),
        cuda_memory_gb=torch.cuda.get_device_properties(0).total_memory / GIB if cuda else None,
        cuda_count=torch.cuda.device_count() if cuda else 0,
        mps_built=mps.is_built(),
        mps_available=mps_available,
        macos_version=_version_tuple(mac) if mac else None,
        apple_chip=_apple_chip(),
        mps_recommended_memory_gb=recommended,
        cpu_name=cpu_name,
        # avx512_bf16 / amx_bf16 on x86, bf16 on Arm: without them bf16 is emulated, slowly.
        cpu_bf16=bool(flags & {"avx512_bf16", "amx_bf16", "bf16"}),
        cpu_count=psutil.cpu_count(logical=False) or psutil.cpu_count() or 1,
        ram_total_gb=memory.total / GIB,
        ram_available_gb=memory.available / GIB,
        bitsandbytes=bitsandbytes_version(),
    )


def select_device(
    caps: Capabilities, requested: str = "auto", benchmark_winner: str | None = None
) -> DeviceDecision:
    """CUDA > MPS > CPU, unless configured, or a benchmark recorded here says otherwise."""
    present = {"cuda": caps.cuda_available, "mps": caps.mps_available, "cpu": True}
    if requested != "auto":
        if requested not in present:
            raise DeviceUnavailable(
                tr("Unknown device {requested!r}; use auto, cuda, mps or cpu", requested=requested)
            )
        if not present[requested]:
            why = {
                "cuda": "torch.cuda.is_available() is False (no NVIDIA GPU or a CPU-only torch)",
                "mps": "MPS is not available (needs Apple Silicon, macOS 12.3+ and a torch "
                f"built with MPS; built={caps.mps_built})",
            }[requested]
            raise DeviceUnavailable(
                tr(
                    "QATUNE_DEVICE={requested} but {why}; set QATUNE_DEVICE=auto or cpu",
                    requested=requested,
                    why=why,
                )
            )
        return DeviceDecision(
            cast(Device, requested), (said("QATUNE_DEVICE={device}", device=requested),)
        )
    if benchmark_winner in present and present[benchmark_winner]:
        return DeviceDecision(
            cast(Device, benchmark_winner),
            (
                said(
                    "{device} was fastest in the benchmark recorded on this machine",
                    device=benchmark_winner,
                ),
            ),
        )
    if caps.cuda_available:
        return DeviceDecision("cuda", (said("CUDA GPU found: {name}", name=caps.cuda_name or ""),))
    if caps.mps_available:
        chip = caps.apple_chip or "Apple"
        return DeviceDecision("mps", (said("Apple GPU (MPS) found: {chip}", chip=chip),))
    reasons = [said("no CUDA GPU or Apple GPU found; training on the CPU")]
    if caps.mps_built and not caps.mps_available:
        reasons.append(
            said("torch has MPS built in but it is unavailable (macOS older than 12.3?)")
        )
    return DeviceDecision("cpu", tuple(reasons))


def _old_apple_gpu(chip: str | None) -> bool:
    # M1 and M2 have no bf16 in the GPU: torch emulates it at no speed gain.
    return chip is not None and bool(re.search(r"\bM[12]\b", chip))


def select_precision(
    caps: Capabilities, device: Device, requested: str = "auto"
) -> PrecisionDecision:
    if requested not in ("auto", *PRECISIONS):
        raise ValueError(f"precision must be auto, bf16, fp16 or fp32, not {requested!r}")
    if requested != "auto":
        problem = _precision_problem(caps, device, cast(Precision, requested))
        if problem:
            raise ValueError(problem)
        return PrecisionDecision(
            cast(Precision, requested),
            loss_scaling=requested == "fp16",
            reason=said("{precision} requested for this job", precision=requested),
        )
    if device == "cuda":
        if caps.cuda_bf16:
            return PrecisionDecision(
                "bf16", False, said("CUDA GPU supports bf16: same range as fp32")
            )
        return PrecisionDecision(
            "fp16", True, said("CUDA GPU lacks bf16: fp16 with dynamic loss scaling")
        )
    if device == "mps":
        bf16_ok = (caps.macos_version or (0, 0)) >= (14, 0) and caps.torch_version >= (2, 6)
        if bf16_ok and not _old_apple_gpu(caps.apple_chip):
            return PrecisionDecision(
                "bf16", False, said("macOS 14+ and torch 2.6+: bf16 on this GPU")
            )
        if caps.torch_version >= (2, 5):
            why = (
                said("M1/M2 emulate bf16; fp16 autocast with loss scaling")
                if bf16_ok
                else said(
                    "bf16 on MPS needs macOS 14 and torch 2.6; fp16 autocast with loss scaling"
                )
            )
            return PrecisionDecision("fp16", True, why)
        return PrecisionDecision("fp32", False, said("torch before 2.5 has no MPS autocast: fp32"))
    if caps.cpu_bf16:
        return PrecisionDecision("bf16", False, said("CPU has native bf16 (AVX512-BF16/AMX): bf16"))
    return PrecisionDecision(
        "fp32", False, said("CPU has no native bf16 (it would be emulated): fp32")
    )


def _precision_problem(caps: Capabilities, device: Device, precision: Precision) -> str | None:
    if device == "cuda" and precision == "bf16" and not caps.cuda_bf16:
        return "this CUDA GPU has no bf16; use precision fp16 or auto"
    if device == "cpu" and precision == "fp16":
        return "fp16 training on the CPU is emulated and slow; use bf16 (if native) or fp32"
    if device == "cpu" and precision == "bf16" and not caps.cpu_bf16:
        return "this CPU has no native bf16, so bf16 would be emulated; use fp32 or auto"
    if device == "mps" and precision == "bf16" and (caps.macos_version or (0, 0)) < (14, 0):
        return "bf16 on MPS needs macOS 14 or newer; use fp16 or auto"
    return None


def memory_budget_gb(device: Device, caps: Capabilities) -> tuple[float, Sentence]:
    if device == "cuda" and caps.cuda_memory_gb:
        return caps.cuda_memory_gb * 0.9, said("90% of the GPU's memory")
    if device == "mps" and caps.mps_recommended_memory_gb:
        # Unified memory: past the recommended working set macOS swaps, then MPS fails.
        return caps.mps_recommended_memory_gb * 0.9, said("90% of Metal's recommended working set")
    return caps.ram_available_gb * 0.8, said("80% of the RAM available at start")


@dataclass(frozen=True)
class BenchmarkRun:
    tokens_per_second: float
    precision: Precision
    seconds: float


@dataclass(frozen=True)
class DeviceBenchmark:
    """What `qatune device --benchmark` measured here: the fastest device for training."""

    model: str
    winner: Device
    results: dict[str, BenchmarkRun]
    steps: int
    measured_at: str


@dataclass(frozen=True)
class DevicePlan:
    """The one device decision of a process, with the reason for each part of it."""

    device: Device
    precision: Precision
    loss_scaling: bool
    memory_budget_gb: float
    device_reasons: tuple[Sentence, ...]  # read in the reader's language
    precision_reason: Sentence
    budget_reason: Sentence
    requested: str
    capabilities: Capabilities
    benchmark: DeviceBenchmark | None = None

    @property
    def devices(self) -> int:
        """Devices of the plan's kind a job could train on at once (data parallel)."""
        return max(1, self.capabilities.cuda_count) if self.device == "cuda" else 1

    @property
    def quantization(self) -> QuantizationSupport:
        """The quantized bases a job can train on with this plan's device."""
        caps = self.capabilities
        return support_for(self.device, torch_version=caps.torch_version, library=caps.bitsandbytes)

    @property
    def reasons(self) -> list[Sentence]:
        return [
            *self.device_reasons,
            self.precision_reason,
            said("memory budget: {why}", why=self.budget_reason),
        ]

    def precision_for(self, requested: str) -> PrecisionDecision:
        """A job's own precision ("auto" or a name) on this plan's device."""
        if requested == "auto":
            return PrecisionDecision(self.precision, self.loss_scaling, self.precision_reason)
        return select_precision(self.capabilities, self.device, requested)


def plan_device(
    caps: Capabilities, requested: str = "auto", benchmark: DeviceBenchmark | None = None
) -> DevicePlan:
    """Device (QATUNE_DEVICE, else a recorded benchmark's winner, else CUDA > MPS > CPU),
    then the precision and the memory budget for it. DeviceUnavailable if one is absent."""
    decision = select_device(caps, requested, benchmark.winner if benchmark else None)
    precision = select_precision(caps, decision.device)
    budget, budget_why = memory_budget_gb(decision.device, caps)
    return DevicePlan(
        device=decision.device,
        precision=precision.precision,
        loss_scaling=precision.loss_scaling,
        memory_budget_gb=round(budget, 2),
        device_reasons=decision.reasons,
        precision_reason=precision.reason,
        budget_reason=budget_why,
        requested=requested,
        capabilities=caps,
        benchmark=benchmark,
    )
