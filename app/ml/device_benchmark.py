"""`qatune device --benchmark`: which device trains this model fastest here?

The seeds' question ("on an M1, is MPS faster than the CPU for this model?") has no
general answer: it depends on the model's size. So we time a few real training steps
(the same ModelTrainer a job uses) on every device present and record the winner;
QATUNE_DEVICE=auto then trains on it.
"""

import json
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loguru import logger

RESULT_FILE = "device_benchmark.json"
BENCH_STEPS = 6


def load_benchmark(data_dir: Path) -> dict[str, Any] | None:
    path = data_dir / RESULT_FILE
    if not path.exists():
        return None
    try:
        result: dict[str, Any] = json.loads(path.read_text())
        return result
    except (OSError, json.JSONDecodeError):
        return None


def _synthetic_pairs(n: int = 48) -> list[tuple[str, str]]:
    return [
        (f"Question {i}: what is {i} times {i + 3}?", f"{i} times {i + 3} is {i * (i + 3)}. " * 3)
        for i in range(n)
    ]


def run_benchmark(settings: Any, *, model: str) -> dict[str, Any]:
    from app.core.storage import Storage, write_atomic
    from app.ml.device import probe_capabilities
    from app.ml.model_trainer import ModelTrainer, TrainingRequest

    caps = probe_capabilities()
    present = {"cuda": caps.cuda_available, "mps": caps.mps_available}
    devices = ["cpu", *(device for device, ok in present.items() if ok)]
    results: dict[str, Any] = {}
    for device in devices:
        with tempfile.TemporaryDirectory() as scratch:
            request = TrainingRequest(
                base_model=model,
                pairs=_synthetic_pairs(),
                output_dir=Path(scratch) / "adapter",
                model_cache_dir=Storage(settings.data_dir).models_dir,
                hyperparameters={"max_steps": BENCH_STEPS, "effective_batch_size": 8},
                device=device,
                offline=settings.offline,
            )
            started = time.perf_counter()
            metrics = ModelTrainer(request).run().metrics
        results[device] = {
            "tokens_per_second": metrics["tokens_per_second"],
            "precision": metrics["dtype"],
            "seconds": round(time.perf_counter() - started, 2),
        }
        logger.info("benchmark {}: {}", device, results[device])
    winner = max(results, key=lambda d: results[d]["tokens_per_second"])
    record = {
        "model": model,
        "winner": winner,
        "results": results,
        "steps": BENCH_STEPS,
        "measured_at": datetime.now(UTC).isoformat(),
    }
    write_atomic(settings.data_dir / RESULT_FILE, json.dumps(record, indent=2).encode())
    return record
