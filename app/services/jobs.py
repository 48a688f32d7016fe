"""Jobs: the state machine. Every change of a job's status is made here, and only here.

queued ──claim──► running ──► succeeded | failed | cancelled
  │  ▲                 │  └─(interrupted: resumes from its last checkpoint)─► queued
  │  └──resume── paused ◄──pause (at a checkpoint)
  └──pause──► paused;  queued | paused ──cancel──► cancelled

The worker reports what happened as typed values (events, an outcome); the rules that turn
them into statuses live below. A cancel that ends in a kill is a cancel. A run that is
interrupted (the service stopped or died, the training child was killed) goes back to the
queue and resumes from its newest checkpoint. Only a death of the job's own run that made
no new checkpoint since its previous death counts as a failure; after
QATUNE_MAX_JOB_ATTEMPTS of those the job fails with what happened. Restarts of the service
never count.
"""

import shutil
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from sqlalchemy import Select, func, select, update
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.errors import ConflictError, ForbiddenError, NotFoundError, ValidationFailed
from app.core.names import HUB_ID
from app.core.storage import Storage, new_key, write_atomic
from app.db.base import utcnow
from app.db.models import Job, JobEvent, JobStatus, User
from app.ml.builtin import is_builtin
from app.ml.events import (
    Checkpointed,
    DeviceChosen,
    Evaluated,
    EventData,
    Learned,
    Level,
    MemoryReport,
    Planned,
    Progress,
    Started,
    StatusChanged,
    TrainingEvent,
    Validated,
)
from app.ml.pairs import QAPair
from app.ml.training.adapter_files import AdapterInvalid, read_adapter_metadata
from app.ml.training.checkpoints import checkpoint_dirs, step_of
from app.schemas.jobs import JobCreate
from app.services import datasets as datasets_service
from app.services.qa_parsing import validate_pairs, write_jsonl
from app.worker.protocol import Cancelled, Interrupted, Outcome, Paused, Succeeded

QUEUED, RUNNING, PAUSED, SUCCEEDED, FAILED, CANCELLED = JobStatus
TERMINAL = frozenset({SUCCEEDED, FAILED, CANCELLED})
TRANSITIONS: dict[str, frozenset[JobStatus]] = {
    QUEUED: frozenset({RUNNING, PAUSED, CANCELLED}),
    RUNNING: frozenset({SUCCEEDED, FAILED, CANCELLED, QUEUED, PAUSED}),
    PAUSED: frozenset({QUEUED, CANCELLED}),
    SUCCEEDED: frozenset(),
    FAILED: frozenset(),
    CANCELLED: frozenset(),
}


def _transition(job: Job, new_status: JobStatus) -> None:
    if new_status not in TRANSITIONS[job.status]:
        raise ConflictError(f"Job {job.id} is {job.status}; it cannot become {new_status}")
    job.status = new_status
    if new_status == RUNNING:
        job.started_at = utcnow()
    if new_status != RUNNING:
        job.eta_seconds = None
        job.worker_id = None
        job.pause_requested = False
    if new_status in TERMINAL:
        job.finished_at = utcnow()


# ------------------------------------------------------------------ creating and reading
def check_base_model(name: str, *, user: User, settings: Settings) -> None:
    """Built-in models, hub ids and configured models for everyone; absolute paths on the
    server for admins. The message never says whether a path exists."""
    if is_builtin(name) or name in settings.base_models or HUB_ID.match(name):
        return
    if Path(name).is_absolute() and user.is_admin:
        return
    if Path(name).is_absolute():
        raise ForbiddenError(
            "Only admins may train on a server path; ask one to add it to QATUNE_BASE_MODELS"
        )
    raise ValidationFailed(
        f"base_model {name!r} is not builtin:tiny, a hub id like Qwen/Qwen2.5-0.5B-Instruct, "
        "or a configured model (GET /models lists them)",
        details=[{"field": "base_model", "message": "unknown base model"}],
    )


def training_pairs(
    session: Session, *, user: User, storage: Storage, request: JobCreate
) -> tuple[list[QAPair], int | None]:
    if request.dataset_id is not None:
        dataset = datasets_service.get_dataset(session, user=user, dataset_id=request.dataset_id)
        return datasets_service.read_pairs(storage, dataset), dataset.id
    return validate_pairs(request.qa_pairs or []), None


def create_job(
    session: Session,
    *,
    user: User,
    storage: Storage,
    settings: Settings,
    request: JobCreate,
    fit_check: Callable[[list[QAPair]], None] | None = None,
) -> Job:
    """`fit_check` may refuse the pairs (memory); it runs after the permission check."""
    base_model = request.base_model or settings.default_base_model
    check_base_model(base_model, user=user, settings=settings)
    pairs, dataset_id = training_pairs(session, user=user, storage=storage, request=request)
    hyperparameters = request.hyperparameters
    validation: list[QAPair] = []
    if request.validation_dataset_id is not None:
        if hyperparameters.validation_split not in ("auto", 0):
            raise ValidationFailed(
                "Give a validation file or a validation_split, not both",
                details=[{"field": "hyperparameters.validation_split", "message": "not both"}],
            )
        validation = datasets_service.read_pairs(
            storage,
            datasets_service.get_dataset(
                session, user=user, dataset_id=request.validation_dataset_id
            ),
        )
        hyperparameters = hyperparameters.model_copy(update={"validation_split": 0.0})
    if fit_check is not None:
        fit_check(pairs)
    key = new_key()
    # The job trains on its own copy: deleting or replacing the dataset later changes nothing.
    write_atomic(storage.job_train_file(key), write_jsonl(pairs))
    if validation:
        write_atomic(storage.job_validation_file(key), write_jsonl(validation))
    job = Job(
        owner_id=user.id,
        dataset_id=dataset_id,
        validation_dataset_id=request.validation_dataset_id,
        name=request.name or f"{base_model.split('/')[-1]} on {len(pairs)} pairs",
        suffix=request.suffix,
        labels=request.metadata,
        base_model=base_model,
        status=QUEUED,
        hyperparameters=hyperparameters.model_dump(mode="json"),
        num_examples=len(pairs),
        storage_key=key,
    )
    session.add(job)
    try:
        session.flush()
    except BaseException:
        storage.remove_job_files(key)
        raise
    add_event(session, job, "INFO", f"Job queued: {len(pairs)} QA pairs on {base_model}")
    return job


def visible_jobs(user: User) -> Select[Job]:
    query = select(Job)
    return query if user.is_admin else query.where(Job.owner_id == user.id)


def get_job(session: Session, *, user: User, job_id: int) -> Job:
    job = session.scalar(visible_jobs(user).where(Job.id == job_id))
    if job is None:
        raise NotFoundError(f"Job {job_id} not found; GET /jobs lists yours")
    return job


def list_jobs(
    session: Session, *, user: User, status: str | None, limit: int, offset: int
) -> tuple[list[Job], int]:
    query = visible_jobs(user)
    if status:
        query = query.where(Job.status == status)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    items = session.scalars(query.order_by(Job.id.desc()).limit(limit).offset(offset))
    return list(items), total


def page(session: Session, *, user: User, before: int | None, limit: int) -> tuple[list[Job], bool]:
    """Newest first: up to `limit` jobs older than job `before`, and whether more follow."""
    query = visible_jobs(user)
    if before is not None:
        query = query.where(Job.id < before)
    found = list(session.scalars(query.order_by(Job.id.desc()).limit(limit + 1)))
    return found[:limit], len(found) > limit


def events_page(
    session: Session, *, job: Job, before: int | None, limit: int
) -> tuple[list[JobEvent], bool]:
    """Newest first: up to `limit` events before event `before`, and whether more follow."""
    query = select(JobEvent).where(JobEvent.job_id == job.id)
    if before is not None:
        query = query.where(JobEvent.seq < before)
    found = list(session.scalars(query.order_by(JobEvent.seq.desc()).limit(limit + 1)))
    return found[:limit], len(found) > limit


def succeeded_jobs(session: Session, *, user: User) -> list[Job]:
    """Jobs whose trained model can be used: succeeded, model not deleted."""
    query = visible_jobs(user).where(Job.status == SUCCEEDED, Job.model_deleted_at.is_(None))
    return list(session.scalars(query.order_by(Job.id.desc())))


def list_events(session: Session, *, job: Job, after: int, limit: int) -> list[JobEvent]:
    query = (
        select(JobEvent)
        .where(JobEvent.job_id == job.id, JobEvent.seq > after)
        .order_by(JobEvent.seq)
        .limit(limit)
    )
    return list(session.scalars(query))


def cancel_job(session: Session, *, user: User, job_id: int) -> Job:
    job = get_job(session, user=user, job_id=job_id)
    if job.status in (QUEUED, PAUSED):
        _transition(job, CANCELLED)
        add_event(session, job, "INFO", f"Cancelled while {job.status}")
    elif job.status == RUNNING:
        job.cancel_requested = True
        add_event(session, job, "INFO", "Cancel requested; stopping within a few seconds")
    else:
        raise ConflictError(f"Job {job_id} has already {job.status}; there is nothing to cancel")
    return job


def pause_job(session: Session, *, user: User, job_id: int) -> Job:
    """A queued job waits; a running one stops at a checkpoint within seconds."""
    job = get_job(session, user=user, job_id=job_id)
    if job.status == QUEUED:
        _transition(job, PAUSED)
        add_event(session, job, "INFO", "Paused before it started; resume it to queue it again")
    elif job.status == RUNNING and not job.cancel_requested:
        job.pause_requested = True
        add_event(session, job, "INFO", "Pause requested; saving a checkpoint and stopping")
    else:
        raise ConflictError(f"Job {job_id} is {job.status}; only queued or running jobs pause")
    return job


def resume_job(session: Session, *, user: User, job_id: int) -> Job:
    """Back to the queue; it continues from its newest checkpoint."""
    job = get_job(session, user=user, job_id=job_id)
    if job.status != PAUSED:
        raise ConflictError(f"Job {job_id} is {job.status}; only paused jobs resume")
    _transition(job, QUEUED)
    where = f"step {job.checkpoint_step}" if job.checkpoint_step else "the start"
    add_event(session, job, "INFO", f"Resumed: queued to continue from {where}")
    return job


def delete_job(session: Session, *, user: User, storage: Storage, job_id: int) -> Job:
    job = get_job(session, user=user, job_id=job_id)
    if job.status not in (*TERMINAL, PAUSED):
        raise ConflictError(f"Job {job_id} is {job.status}; cancel it first, then delete it")
    session.delete(job)
    session.flush()
    storage.remove_job_files(job.storage_key)
    return job


def delete_model(session: Session, *, user: User, storage: Storage, job_id: int) -> Job:
    """Remove a finished job's trained model (its adapter and checkpoints); the job stays."""
    job = get_job(session, user=user, job_id=job_id)
    if job.model_deleted_at is not None:
        raise NotFoundError(f"Job {job.id}'s model was deleted already")
    require_succeeded(job)
    job.model_deleted_at = utcnow()
    add_event(session, job, "INFO", "The trained model was deleted")
    session.flush()
    shutil.rmtree(storage.adapter_dir(job.storage_key), ignore_errors=True)
    shutil.rmtree(storage.checkpoints_dir(job.storage_key), ignore_errors=True)
    shutil.rmtree(storage.exports_dir(job.storage_key), ignore_errors=True)
    return job


def require_succeeded(job: Job) -> None:
    if job.status != SUCCEEDED:
        why: str = {
            QUEUED: "it is still queued",
            RUNNING: "it is still training; ask again when it has succeeded",
            PAUSED: "it is paused; resume it, or ask one of its checkpoints",
            FAILED: f"it failed: {job.error}",
            CANCELLED: "it was cancelled; start a new job",
        }[JobStatus(job.status)]
        raise ConflictError(f"Job {job.id} has no trained adapter: {why}")


@dataclass(frozen=True)
class CheckpointFile:
    step: int
    train_loss: float | None
    created_at: datetime
    path: Path


def checkpoints(storage: Storage, job: Job) -> list[CheckpointFile]:
    """The job's checkpoints on disk, oldest first."""
    found = []
    for path in checkpoint_dirs(storage.checkpoints_dir(job.storage_key)):
        try:
            metadata = read_adapter_metadata(path)
        except AdapterInvalid:
            continue  # being written, or damaged: not servable
        loss = metadata.metrics.get("train_loss")
        created = datetime.fromtimestamp(path.stat().st_mtime, UTC)
        found.append(CheckpointFile(step_of(path), loss, created, path))
    return found


def servable_adapter(
    storage: Storage, job: Job, *, checkpoint_step: int | None = None
) -> tuple[str, Path]:
    """The adapter a question goes to: the final one, or one of the job's checkpoints."""
    if job.model_deleted_at is not None:
        raise NotFoundError(f"Job {job.id}'s model was deleted; train a new one")
    if checkpoint_step is None:
        require_succeeded(job)
        return job.storage_key, storage.adapter_dir(job.storage_key)
    for checkpoint in checkpoints(storage, job):
        if checkpoint.step == checkpoint_step:
            return f"{job.storage_key}@{checkpoint.step}", checkpoint.path
    raise NotFoundError(
        f"Job {job.id} has no checkpoint at step {checkpoint_step}; "
        f"GET /jobs/{job.id}/checkpoints lists them"
    )


# --------------------------------------------------------------------- the worker's side
def add_event(
    session: Session, job: Job, level: Level, message: str, data: EventData | None = None
) -> JobEvent:
    seq = (session.scalar(select(func.max(JobEvent.seq)).where(JobEvent.job_id == job.id)) or 0) + 1
    payload = data.model_dump(mode="json") if data is not None else {}
    event = JobEvent(job_id=job.id, seq=seq, level=level, message=message, data=payload)
    session.add(event)
    return event


def apply_event(job: Job, data: EventData) -> None:
    """Fold what the trainer reported into the job's progress, metrics and settings."""
    match data:
        case Progress():
            job.step, job.total_steps, job.epoch = data.step, data.total_steps, data.epoch
            job.eta_seconds = data.eta_seconds
            job.metrics = {
                **job.metrics,
                "loss": data.loss,
                "learning_rate": data.learning_rate,
                "tokens_per_second": data.tokens_per_second,
                "rss_mb": data.memory.rss_mb,
                "peak_rss_mb": data.memory.peak_rss_mb,
            }
        case MemoryReport(when="after", memory=memory) if memory.peak_rss_mb is not None:
            job.metrics = {**job.metrics, "peak_rss_mb": memory.peak_rss_mb}
        case Started():
            job.total_steps = data.total_steps
        case DeviceChosen():
            job.device, job.dtype = data.device, data.dtype
        case Planned():
            job.plan = data.plan.as_dict()
            job.resolved_hyperparameters = data.hyperparameters.as_dict()
        case Learned():
            job.metrics = {**job.metrics, "train_exact_match": data.learned / data.examples}
        case Validated():  # live, until the final evaluation replaces it
            exact = round(data.exact / data.examples, 4)
            job.metrics = {**job.metrics, "eval_loss": data.loss, "eval_exact_match": exact}
        case Evaluated():
            job.metrics = {**job.metrics, **data.model_dump(exclude={"kind"})}
        case Checkpointed():
            job.checkpoint_step = data.step


def record_events(session: Session, *, job_id: int, events: Iterable[TrainingEvent]) -> None:
    job = session.get(Job, job_id)
    if job is None:  # deleted meanwhile
        return
    for event in events:
        add_event(session, job, event.level, event.message, event.data)
        if event.data is not None:
            apply_event(job, event.data)


def claim_next_job(session: Session, *, worker_id: str) -> int | None:
    """Atomically take the oldest queued job, so two workers never share one.

    SQLite: one UPDATE (SQLite runs one writer at a time). PostgreSQL: the oldest queued
    row not locked by another claim, `FOR UPDATE SKIP LOCKED`, so that concurrent workers
    each take a different job instead of waiting on the same row.
    """
    oldest = select(Job.id).where(Job.status == QUEUED).order_by(Job.id).limit(1)
    if session.get_bind().dialect.name == "postgresql":
        oldest = oldest.with_for_update(skip_locked=True)
    now = utcnow()
    claimed = session.execute(
        update(Job)
        .where(Job.id == oldest.scalar_subquery(), Job.status == QUEUED)
        .values(
            status=RUNNING,
            worker_id=worker_id,
            heartbeat_at=now,
            started_at=now,
            attempts=Job.attempts + 1,
            cancel_requested=False,
        )
        .returning(Job.id)
    ).scalar_one_or_none()
    return claimed


def heartbeat(session: Session, *, job_id: int) -> Literal["continue", "cancel", "pause"]:
    """Mark the job alive; returns what its run should do now."""
    job = session.get(Job, job_id)
    if job is None:  # deleted meanwhile
        return "cancel"
    job.heartbeat_at = utcnow()
    if job.cancel_requested:
        return "cancel"
    return "pause" if job.pause_requested else "continue"


def settle(
    session: Session,
    *,
    job_id: int,
    outcome: Outcome,
    max_failures: int,
    service_stopping: bool = False,
) -> Job | None:
    """The job's status once its run has ended, whatever ended it."""
    job = session.get(Job, job_id)
    if job is None:  # deleted meanwhile
        return None
    if isinstance(outcome, Succeeded):
        _transition(job, SUCCEEDED)
        job.metrics = {**job.metrics, **outcome.metrics.as_dict()}
        job.resolved_hyperparameters = outcome.hyperparameters.as_dict()
        if job.total_steps:
            job.step = job.total_steps
        add_event(session, job, "INFO", "Job succeeded", StatusChanged(status=SUCCEEDED))
    elif job.cancel_requested:  # a cancel that ended in a kill is still a cancel
        _transition(job, CANCELLED)
        add_event(session, job, "INFO", "Job cancelled", StatusChanged(status=CANCELLED))
    elif isinstance(outcome, Paused) and job.pause_requested:
        _transition(job, PAUSED)
        add_event(
            session,
            job,
            "INFO",
            f"Paused at step {outcome.step}; resume it to continue from there",
            StatusChanged(status=PAUSED),
        )
    elif service_stopping or isinstance(outcome, Paused | Cancelled):
        _requeue(session, job, "the service is stopping" if service_stopping else "stopped")
    elif isinstance(outcome, Interrupted):
        _interrupted(session, job, outcome.reason, max_failures=max_failures, counts=True)
    else:
        _fail(session, job, outcome.reason)
    return job


def _fail(session: Session, job: Job, reason: str) -> None:
    _transition(job, FAILED)
    job.error = reason
    add_event(session, job, "ERROR", f"Job failed: {reason}", StatusChanged(status=FAILED))


def _requeue(session: Session, job: Job, why: str) -> None:
    _transition(job, QUEUED)
    where = f"step {job.checkpoint_step}" if job.checkpoint_step else "the start"
    add_event(session, job, "WARNING", f"Re-queued ({why}); it continues from {where}")


def _interrupted(
    session: Session, job: Job, reason: str, *, max_failures: int, counts: bool
) -> None:
    """A run that died: resume it, unless it keeps dying without getting anywhere."""
    progressed = job.checkpoint_step is not None and job.checkpoint_step != job.interrupted_at_step
    job.interrupted_at_step = job.checkpoint_step
    if counts and not progressed:
        job.failures += 1
    if job.failures >= max_failures:
        _fail(
            session,
            job,
            f"{reason[:1].upper()}{reason[1:]}, {job.failures} time(s) with no progress in "
            "between; the job was given up",
        )
    else:
        _requeue(session, job, reason)


def recover_orphaned_jobs(
    session: Session,
    *,
    settings: Settings,
    host: str,
    pid_alive: Callable[[int], bool],
    now: datetime | None = None,
    running_here: Collection[int] = (),
) -> list[int]:
    """Jobs left `running` by a worker that died: re-queue them, or fail them after max tries.

    A worker on this host is dead when its process is gone; one elsewhere when its
    heartbeat is older than QATUNE_HEARTBEAT_TIMEOUT_SECONDS. `running_here`: the jobs the
    calling worker runs now, which are never orphans (its own pid reads as a dead one's:
    after a restart a new process may have the old one's pid, as PID 1 in a container).
    """
    now = now or utcnow()
    stale_before = now - timedelta(seconds=settings.heartbeat_timeout_seconds)
    recovered = []
    for job in session.scalars(select(Job).where(Job.status == RUNNING)):
        if job.id in running_here:
            continue
        owner_host, _, pid = (job.worker_id or ":").rpartition(":")
        same_host_dead = owner_host == host and pid.isdigit() and not pid_alive(int(pid))
        stale = job.heartbeat_at is None or job.heartbeat_at < stale_before
        if not (same_host_dead or stale):
            continue
        why = (
            "its worker process died" if same_host_dead else "its worker stopped sending heartbeats"
        )
        if job.cancel_requested:
            _transition(job, CANCELLED)
            add_event(session, job, "WARNING", f"Cancelled: {why} while a cancel was pending")
        elif job.pause_requested:
            _transition(job, PAUSED)
            add_event(session, job, "WARNING", f"Paused: {why} while a pause was pending")
        else:  # the service (or its host) stopped: not a failure of the job
            _interrupted(session, job, why, max_failures=settings.max_job_attempts, counts=False)
        recovered.append(job.id)
    return recovered
