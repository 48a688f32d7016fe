"""`qatune device --benchmark`: which device trains this model fastest here?

The seeds' question ("on an M1, is MPS faster than the CPU for this model?") has no
general answer: it depends on the model's size. So we time a few real training steps
(the same ModelTrainer a job uses) on every device present and record the winner;
QATUNE_DEVICE=auto then trains on it (device.plan_device).
"""

import json
import tempfile
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

from loguru import logger

from app.ml.device import (
    BenchmarkRun,
    Capabilities,
    Device,
    DeviceBenchmark,
    DevicePlan,
    Precision,
    plan_device,
)
from app.ml.pairs import QAPair

RESULT_FILE = "device_benchmark.json"
BENCH_STEPS = 6


def plan_this_machine(
    choice: str, data_dir: Path, capabilities: Capabilities | None = None
) -> DevicePlan:
    """The device policy, for the API's machine and every Ray node alike: QATUNE_DEVICE
    (`choice`), else the benchmark recorded in this machine's data directory, else
    CUDA > MPS > CPU. DeviceUnavailable when `choice` names a device this machine lacks."""
    from app.ml.device import probe_capabilities

    caps = capabilities or probe_capabilities()
    return plan_device(caps, choice, load_benchmark(data_dir))


def load_benchmark(data_dir: Path) -> DeviceBenchmark | None:
    """The recorded benchmark, or None if there is none or it cannot be read."""
    path = data_dir / RESULT_FILE
    try:
        raw = json.loads(path.read_text())
        return DeviceBenchmark(
            model=str(raw["model"]),
            winner=raw["winner"],
            results={
                device: BenchmarkRun(
                    tokens_per_second=float(run["tokens_per_second"]),
                    precision=run["precision"],
                    seconds=float(run["seconds"]),
                )
                for device, run in raw["results"].items()
            },
            steps=int(raw["steps"]),
            measured_at=str(raw["measured_at"]),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _synthetic_pairs(n: int = 48) -> list[QAPair]:
    return [
        QAPair(
            f"Question {i}: what is {i} times {i + 3}?", f"{i} times {i + 3} is {i * (i + 3)}. " * 3
        )
        for i in range(n)
    ]


def run_benchmark(
    data_dir: Path, *, caps: Capabilities, model: str, model_cache_dir: Path, offline: bool
) -> DeviceBenchmark:
    from app.core.storage import write_atomic
    from app.ml.hyperparameters import HyperparameterRequest
    from app.ml.training.request import TrainingRequest
    from app.ml.training.trainer import ModelTrainer

    candidates: list[tuple[Device, bool]] = [
        ("cpu", True),
        ("cuda", caps.cuda_available),
        ("mps", caps.mps_available),
    ]
    present = [device for device, available in candidates if available]
    results: dict[str, BenchmarkRun] = {}
    for device in present:
        with tempfile.TemporaryDirectory() as scratch:
            request = TrainingRequest(
                base_model=model,
                pairs=_synthetic_pairs(),
                output_dir=Path(scratch) / "adapter",
                model_cache_dir=model_cache_dir,
                hyperparameters=HyperparameterRequest(max_steps=BENCH_STEPS, batch_size=8),
                device_plan=plan_device(caps, device),
                offline=offline,
            )
            started = time.perf_counter()
            metrics = ModelTrainer(request).run().metrics
        results[device] = BenchmarkRun(
            tokens_per_second=metrics.tokens_per_second,
            precision=cast(Precision, metrics.dtype),
            seconds=round(time.perf_counter() - started, 2),
        )
        logger.info("benchmark {}: {}", device, results[device])
    winner = max(present, key=lambda d: results[d].tokens_per_second)
    record = DeviceBenchmark(
        model=model,
        winner=winner,
        results=results,
        steps=BENCH_STEPS,
        measured_at=datetime.now(UTC).isoformat(),
    )
    write_atomic(data_dir / RESULT_FILE, json.dumps(asdict(record), indent=2).encode())
    return record
