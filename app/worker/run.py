"""One training run, wherever it executes: a `TrainingSpec` in, events out, one `Outcome`.

The local executor calls it in a fresh child process, the Ray executor in a Ray task on a
node; both only decide how the events travel and how a stop request arrives.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING

from loguru import logger

from app.core.disk import disk_full, failed_for_space
from app.core.language import said, verbatim
from app.jobs.outcomes import Cancelled, Failed, OutOfSpace, Paused, Reported, Succeeded
from app.jobs.spec import TrainingSpec

if TYPE_CHECKING:
    from app.ml.events import StopRequest, TrainingEvent


def train(
    spec: TrainingSpec,
    *,
    emit: "Callable[[TrainingEvent], None]",
    should_stop: "Callable[[], StopRequest | None]",
) -> Reported:
    """Run the job's ModelTrainer; every way it can end becomes a Reported outcome (a crash too:
    the user gets a message, the log the traceback)."""
    # Heavy imports here: the caller sets the torch environment and logging first.
    from app.ml.models import ModelUnavailable
    from app.ml.training.stops import TrainingCancelled, TrainingFailed, TrainingPaused
    from app.ml.training.trainer import ModelTrainer

    try:
        result = ModelTrainer(spec.request, on_event=emit, should_stop=should_stop).run()
        return Succeeded(result.metrics, result.hyperparameters)
    except TrainingCancelled:
        return Cancelled()
    except TrainingPaused as paused:
        return Paused(paused.step)
    except (TrainingFailed, ModelUnavailable) as exc:
        logger.warning("job {} failed: {}", spec.job_id, exc)
        return Failed(exc.reason if isinstance(exc, TrainingFailed) else verbatim(str(exc)))
    except Exception as exc:  # noqa: BLE001
        where = spec.request.output_dir.parent
        if failed_for_space(exc, where):
            logger.warning("job {} stopped, the disk is full: {}", spec.job_id, exc)
            return OutOfSpace(disk_full(where))
        logger.exception("job {} crashed", spec.job_id)
        return Failed(
            said("Unexpected error: {error}. See the job log", error=f"{type(exc).__name__}: {exc}")
        )
