"""The training child process: runs one ModelTrainer and reports over a pipe.

A child of its own, so that the API stays responsive, a crash or OOM kill cannot take the
service down, cancel is a signal, and all the memory the job used goes back to the OS.
"""

import ctypes
import os
import signal
import sys
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

from app.core.logging import FORMAT, setup_logging
from app.worker.protocol import Cancelled, ChildMessage, Failed, Paused, Succeeded, TrainingSpec

if TYPE_CHECKING:
    from app.ml.training.loop import StopRequest


def _die_with_parent() -> None:
    """Linux: get SIGKILL when the parent dies, so no training runs on unsupervised."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def run_child(spec: TrainingSpec, conn: Connection) -> None:
    _die_with_parent()
    os.nice(spec.niceness)
    spec.torch_environment.apply()
    setup_logging(spec.log_dir)
    from loguru import logger

    logger.add(spec.job_log, format=FORMAT, level="INFO", encoding="utf-8", diagnose=False)
    # SIGTERM: cancel (stop now, save nothing); SIGUSR1: pause (stop at a checkpoint).
    asked: list[StopRequest] = []
    signal.signal(signal.SIGTERM, lambda *_: asked.append("cancel"))
    signal.signal(signal.SIGUSR1, lambda *_: asked.append("pause"))

    def should_stop() -> "StopRequest | None":
        return "cancel" if "cancel" in asked else (asked[0] if asked else None)

    def send(message: ChildMessage) -> None:
        conn.send(message)

    # Heavy imports after logging and the environment are in place.
    from app.ml.events import TrainingEvent
    from app.ml.models import ModelUnavailable
    from app.ml.training.loop import TrainingCancelled, TrainingFailed, TrainingPaused
    from app.ml.training.trainer import ModelTrainer, TrainingRequest
    from app.services.qa_parsing import read_jsonl

    def emit(event: TrainingEvent) -> None:
        logger.log(event.level, "job {}: {}", spec.job_id, event.message)
        send(event)

    try:
        request = TrainingRequest(
            base_model=spec.base_model,
            pairs=read_jsonl(spec.pairs_file.read_text()),
            validation_pairs=(
                read_jsonl(spec.validation_file.read_text()) if spec.validation_file else []
            ),
            output_dir=spec.output_dir,
            adapter_name=f"qatune-job-{spec.job_id}",  # the folder in the adapter's zip
            model_cache_dir=spec.model_cache_dir,
            hyperparameters=spec.hyperparameters,
            device_plan=spec.device_plan,
            offline=spec.offline,
            configured_models=spec.configured_models,
            resolved=spec.resolved,
            checkpoint_dir=spec.checkpoint_dir,
            resume_from=spec.resume_from,
            cpu_threads=spec.cpu_threads,
        )
        result = ModelTrainer(request, on_event=emit, should_stop=should_stop).run()
        send(Succeeded(result.metrics, result.hyperparameters))
    except TrainingCancelled:
        send(Cancelled())
    except TrainingPaused as paused:
        send(Paused(paused.step))
    except (TrainingFailed, ModelUnavailable) as exc:
        logger.warning("job {} failed: {}", spec.job_id, exc)
        send(Failed(str(exc)))
    except BrokenPipeError:
        pass  # the supervisor is gone; nobody to report to
    except Exception as exc:  # noqa: BLE001  (the user gets a message, the log the traceback)
        logger.exception("job {} crashed", spec.job_id)
        send(Failed(f"Unexpected error: {type(exc).__name__}: {exc}. See the job log"))
    finally:
        conn.close()
