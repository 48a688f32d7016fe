"""The training child process: runs one ModelTrainer and reports over a pipe.

A child of its own, so that the API stays responsive, a crash or OOM kill cannot take the
service down, cancel is a signal, and all the memory the job used goes back to the OS.
"""

import ctypes
import signal
import sys
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from app.core.logging import FORMAT, setup_logging
from app.ml.environment import apply_torch_environment


def _die_with_parent() -> None:
    """Linux: get SIGKILL when the parent dies, so no training runs on unsupervised."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def run_child(spec: dict[str, Any], conn: Connection) -> None:
    _die_with_parent()
    apply_torch_environment(
        mps_fallback=spec["mps_fallback"],
        mps_high_watermark_ratio=spec["mps_high_watermark_ratio"],
        mps_low_watermark_ratio=spec["mps_low_watermark_ratio"],
    )
    setup_logging(Path(spec["log_dir"]))
    from loguru import logger

    logger.add(spec["job_log"], format=FORMAT, level="INFO", encoding="utf-8", diagnose=False)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def emit(level: str, message: str, data: dict[str, Any]) -> None:
        logger.log(level, "job {}: {}", spec["job_id"], message)
        conn.send(("event", level, message, data))

    # Heavy imports after logging and the environment are in place.
    from app.ml.model_trainer import (
        ModelTrainer,
        TrainingCancelled,
        TrainingFailed,
        TrainingRequest,
    )
    from app.ml.models import ModelUnavailable
    from app.services.qa_parsing import read_jsonl

    try:
        request = TrainingRequest(
            base_model=spec["base_model"],
            pairs=read_jsonl(Path(spec["train_file"]).read_text()),
            output_dir=Path(spec["output_dir"]),
            model_cache_dir=Path(spec["model_cache_dir"]),
            hyperparameters=spec["hyperparameters"],
            device=spec["device"],
            offline=spec["offline"],
        )
        result = ModelTrainer(request, on_event=emit, should_stop=stop.is_set).run()
        conn.send(("succeeded", result.metrics))
    except TrainingCancelled:
        conn.send(("cancelled", {}))
    except (TrainingFailed, ModelUnavailable) as exc:
        logger.warning("job {} failed: {}", spec["job_id"], exc)
        conn.send(("failed", str(exc)))
    except BrokenPipeError:
        pass  # the supervisor is gone; nobody to report to
    except Exception as exc:  # noqa: BLE001  (the user gets a message, the log the traceback)
        logger.exception("job {} crashed", spec["job_id"])
        conn.send(("failed", f"Unexpected error: {type(exc).__name__}: {exc}. See the job log"))
    finally:
        conn.close()
