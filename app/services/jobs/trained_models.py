"""A job's trained model on disk, as users reach it: the final adapter or a checkpoint,
its answer table, and why there is none yet."""

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from app.core.errors import ConflictError, NotFoundError
from app.core.language import tr
from app.core.storage import Storage
from app.db.models import Job
from app.jobs.status import PAUSED, QUEUED, RUNNING, JobStatus, has_model
from app.ml.training.adapter_files import read_evaluation
from app.ml.training.adapter_metadata import AdapterInvalid, AdapterMetadata, read_adapter_metadata
from app.ml.training.checkpoints import checkpoint_dirs, step_of
from app.ml.training.metrics import EvaluationReport


def require_model(job: Job) -> None:
    """NotFound for a deleted model, Conflict (saying why) for a job that has none."""
    if has_model(job):
        return
    if job.model_deleted_at is not None:
        raise NotFoundError(tr("Job {job_id}'s model was deleted; train a new one", job_id=job.id))
    why = {
        QUEUED: tr("it is still queued"),
        RUNNING: tr("it is still training; ask again when it has succeeded"),
        PAUSED: tr("it is paused; resume it, or ask one of its checkpoints"),
        JobStatus.FAILED: tr("it failed: {error}", error=job.error),
        JobStatus.CANCELLED: tr("it was cancelled; start a new job"),
    }[JobStatus(job.status)]
    raise ConflictError(tr("Job {job_id} has no trained adapter: {why}", job_id=job.id, why=why))


def evaluation(storage: Storage, job: Job) -> EvaluationReport:
    """The trained model's answers beside the expected ones and the base model's."""
    require_model(job)
    report = read_evaluation(storage.adapter_dir(job.storage_key))
    if report is None:
        raise NotFoundError(
            tr(
                "Job {job_id} was trained before qatune kept an evaluation; ask it questions with "
                "POST /jobs/{job_id}/query",
                job_id=job.id,
            )
        )
    if report.kept_why is not None:  # in the reader's language
        report = report.model_copy(update={"kept_reason": report.kept_why.text()})
    return report


@dataclass(frozen=True)
class CheckpointFile:
    step: int
    train_loss: float | None
    created_at: datetime
    path: Path


def checkpoints(storage: Storage, job: Job) -> list[CheckpointFile]:
    """The job's checkpoints on disk, oldest first."""
    if job.model_deleted_at is not None:
        return []
    found = []
    for path in checkpoint_dirs(storage.checkpoints_dir(job.storage_key)):
        try:
            metadata = read_adapter_metadata(path)
        except AdapterInvalid:
            continue  # being written, or damaged: not servable
        loss = metadata.metrics.get("train_loss")
        found.append(CheckpointFile(step_of(path), loss, _saved_at(metadata, path), path))
    return found


def _saved_at(metadata: AdapterMetadata, path: Path) -> datetime:
    """When the checkpoint was written: its own record (the folder's time changes when its
    optimizer state is dropped at the job's end)."""
    try:
        return datetime.fromisoformat(metadata.created_at)
    except ValueError:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC)


def servable_adapter(
    storage: Storage, job: Job, *, checkpoint_step: int | None = None
) -> tuple[str, Path]:
    """The adapter's engine key and directory: the final one, or one of the checkpoints."""
    if checkpoint_step is None:
        require_model(job)
        return job.storage_key, storage.adapter_dir(job.storage_key)
    if job.model_deleted_at is not None:
        raise NotFoundError(tr("Job {job_id}'s model was deleted; train a new one", job_id=job.id))
    for checkpoint in checkpoints(storage, job):
        if checkpoint.step == checkpoint_step:
            return f"{job.storage_key}@{checkpoint.step}", checkpoint.path
    raise NotFoundError(
        tr(
            "Job {job_id} has no checkpoint at step {checkpoint_step}; GET "
            "/jobs/{job_id}/checkpoints lists them",
            job_id=job.id,
            checkpoint_step=checkpoint_step,
        )
    )
