"""Jobs, as the worker runs them: claim, heartbeat, events, endings, and recovery.

A claim, a settled ending and the recovery of an orphaned job are three callers of the
same table (app/jobs/status.py) and, for endings, of the same rule (`verdict`): a run that
died is resumed from its newest checkpoint unless it keeps dying without progress;
QATUNE_MAX_JOB_ATTEMPTS such deaths fail the job. Restarts of the service never count.
"""

from collections.abc import Callable, Collection, Iterable
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.language import Sentence, said
from app.core.names import number_in_digits
from app.db.base import utcnow
from app.db.models import Job
from app.jobs.outcomes import (
    Failed,
    Interrupted,
    Outcome,
    OutOfSpace,
    Paused,
    Succeeded,
    Verdict,
    verdict,
)
from app.jobs.status import PAUSED, QUEUED, RUNNING, JobStatus, move
from app.ml.events import (
    Checkpointed,
    DeviceChosen,
    Evaluated,
    EventData,
    KnowledgeKept,
    Learned,
    MemoryReport,
    Planned,
    Progress,
    Started,
    StatusChanged,
    TrainingEvent,
    Validated,
)
from app.services.jobs import queue
from app.services.jobs.lifecycle import add_event, resumes_from, transition


def apply_event(job: Job, data: EventData) -> None:
    """Fold what the trainer reported into the job's progress, metrics and settings."""
    match data:
        case Progress():
            job.step, job.total_steps, job.epoch = data.step, data.total_steps, data.epoch
            job.eta_seconds = data.eta_seconds
            job.metrics = job.metrics.with_(
                loss=data.loss,
                learning_rate=data.learning_rate,
                tokens_per_second=data.tokens_per_second,
                rss_mb=data.memory.rss_mb,
                peak_rss_mb=data.memory.peak_rss_mb,
                expected_epochs=data.expected_epochs,
            )
        case MemoryReport(when="after", memory=memory) if memory.peak_rss_mb is not None:
            job.metrics = job.metrics.with_(peak_rss_mb=memory.peak_rss_mb)
        case Started():
            job.total_steps = data.total_steps
        case DeviceChosen():
            job.device, job.dtype = data.device, data.dtype
        case Planned():
            job.plan = data.plan
            job.resolved_hyperparameters = data.hyperparameters
        case Learned(final=True):
            job.metrics = job.metrics.cleared("train_written_match").with_(
                train_exact_match=round(data.learned / data.examples, 4),
                train_learned=data.learned,
                train_examples=data.examples,
                kept_epoch=data.kept_epoch,
            )  # the final count is of the questions as written: one figure
        case Learned():
            written = None if data.written is None else round(data.written / data.examples, 4)
            job.metrics = job.metrics.cleared("train_written_match").with_(
                train_exact_match=round(data.learned / data.examples, 4),
                train_written_match=written,
            )  # this epoch's share as written; none where the epoch counted once
        case KnowledgeKept(answers=True):
            job.metrics = job.metrics.with_(kept_answers=data.kept, keep_answers=data.known)
        case KnowledgeKept(epoch=None):
            job.metrics = job.metrics.with_(knowledge_known=data.known, knowledge_kept=data.kept)
        case KnowledgeKept():
            job.metrics = job.metrics.with_(
                knowledge_known=data.known, knowledge_agreement=data.agreement
            )
        case Validated():  # live, until the final evaluation replaces it
            exact = round(data.exact / data.examples, 4)
            job.metrics = job.metrics.with_(eval_loss=data.loss, eval_exact_match=exact)
        case Evaluated():
            job.metrics = job.metrics.with_(**data.model_dump(exclude={"kind"}))
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
    """Atomically take the job at the head of the line (queue.py: a turn per user), so two
    workers never share one: the table's QUEUED -> RUNNING move, written by one UPDATE.

    SQLite: one UPDATE (SQLite runs one writer at a time). PostgreSQL: the first queued
    row not locked by another claim, `FOR UPDATE SKIP LOCKED`, so that concurrent workers
    each take a different job instead of waiting on the same row.
    """
    head = queue.line().limit(1)
    if session.get_bind().dialect.name == "postgresql":
        head = head.with_for_update(of=queue.CANDIDATE, skip_locked=True)
    claim = move(0, QUEUED, RUNNING, now=utcnow(), worker_id=worker_id)
    values = {getattr(Job, field): value for field, value in claim.values.items()}
    claimed = session.execute(
        update(Job)
        .where(Job.id == head.scalar_subquery(), Job.status == QUEUED)
        .values({Job.status: claim.status, Job.attempts: Job.attempts + 1, **values})
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
    _end_run(session, job, outcome, max_failures=max_failures, service_stopping=service_stopping)
    return job


def _end_run(
    session: Session, job: Job, outcome: Outcome, *, max_failures: int, service_stopping: bool
) -> None:
    match verdict(
        outcome,
        cancel_requested=job.cancel_requested,
        pause_requested=job.pause_requested,
        service_stopping=service_stopping,
    ):
        case Verdict.SUCCEED:
            assert isinstance(outcome, Succeeded)
            transition(job, JobStatus.SUCCEEDED)
            job.metrics = job.metrics.with_(**outcome.metrics.as_dict())
            job.resolved_hyperparameters = outcome.hyperparameters
            if job.total_steps:
                job.step = job.total_steps
            _said(session, job, "INFO", said("Job succeeded"))
        case Verdict.CANCEL:
            transition(job, JobStatus.CANCELLED)
            died = (
                said(" ({why} while it was stopping)", why=outcome.reason)
                if isinstance(outcome, Interrupted)
                else ""
            )
            _said(session, job, "INFO", said("Job cancelled{died}", died=died))
        case Verdict.PAUSE:
            transition(job, JobStatus.PAUSED)
            step = outcome.step if isinstance(outcome, Paused) else job.checkpoint_step or 0
            _said(
                session,
                job,
                "INFO",
                said("Paused at step {step}; resume it to continue from there", step=step),
            )
        case Verdict.REQUEUE:
            _requeue(
                session,
                job,
                said("the service is stopping") if service_stopping else said("stopped"),
            )
        case Verdict.RESUME_OR_GIVE_UP:
            assert isinstance(outcome, Interrupted)
            _resume_or_give_up(session, job, outcome, max_failures=max_failures)
        case Verdict.WAIT_FOR_SPACE:
            assert isinstance(outcome, OutOfSpace)
            transition(job, JobStatus.PAUSED)
            job.waiting_for_disk = True
            _said(
                session,
                job,
                "ERROR",
                said(
                    "Paused: {why}. It goes on from {where} by itself once the disk has room "
                    "again (QATUNE_DISK_LOW_MB free), or resume it sooner",
                    why=outcome.reason,
                    where=resumes_from(job),
                ),
            )
        case Verdict.FAIL:
            assert isinstance(outcome, Failed)
            _fail(session, job, outcome.reason)


def _said(session: Session, job: Job, level: Literal["INFO", "ERROR"], message: Sentence) -> None:
    add_event(session, job, level, message, StatusChanged(status=job.status))


def _fail(session: Session, job: Job, reason: Sentence) -> None:
    transition(job, JobStatus.FAILED)
    job.error, job.error_said = reason.english(), reason
    _said(session, job, "ERROR", said("Job failed: {reason}", reason=reason))


def _requeue(session: Session, job: Job, why: Sentence) -> None:
    transition(job, QUEUED)
    add_event(
        session,
        job,
        "WARNING",
        said("Re-queued ({why}); it continues from {where}", why=why, where=resumes_from(job)),
    )


def _resume_or_give_up(
    session: Session, job: Job, outcome: Interrupted, *, max_failures: int
) -> None:
    """A run that died: resume it, unless it keeps dying without getting anywhere."""
    progressed = job.checkpoint_step is not None and job.checkpoint_step != job.interrupted_at_step
    job.interrupted_at_step = job.checkpoint_step
    if progressed:  # deaths count only while no new checkpoint comes between them
        job.failures = 0
    if outcome.counts and not progressed:
        job.failures += 1
    if job.failures >= max_failures:
        _fail(
            session,
            job,
            said(
                "The job was given up: {why}, {failures} time(s) with no progress in between",
                why=outcome.reason,
                failures=job.failures,
            ),
        )
    else:
        _requeue(session, job, outcome.reason)


def recover_orphaned_jobs(
    session: Session,
    *,
    settings: Settings,
    host: str,
    pid_alive: Callable[[int], bool],
    now: datetime | None = None,
    running_here: Collection[int] = (),
) -> list[int]:
    """Jobs left `running` by a worker that died: ended as any run that died is.

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
        pid_number = number_in_digits(pid, max_digits=10)
        same_host_dead = owner_host == host and pid_number is not None and not pid_alive(pid_number)
        stale = job.heartbeat_at is None or job.heartbeat_at < stale_before
        if not (same_host_dead or stale):
            continue
        why = (
            said("its worker process died")
            if same_host_dead
            else said("its worker stopped sending heartbeats")
        )
        # The service (or its host) stopped: not a failure of the job's own run.
        died = Interrupted(why, counts=False)
        _end_run(session, job, died, max_failures=settings.max_job_attempts, service_stopping=False)
        recovered.append(job.id)
    return recovered


def requeue_restored(session: Session, *, settings: Settings) -> list[int]:
    """After a restore: the jobs that were running when the backup was taken have no run
    here. Each ends as a run that died with the service does: queued again once (no
    failure counted), to go on from its newest checkpoint."""
    restored = Interrupted(said("the service was restored from a backup"), counts=False)
    requeued = []
    for job in session.scalars(select(Job).where(Job.status == RUNNING)):
        _end_run(
            session, job, restored, max_failures=settings.max_job_attempts, service_stopping=False
        )
        requeued.append(job.id)
    return requeued


def resume_jobs_waiting_for_disk(session: Session, *, free_mb: int) -> list[int]:
    """The disk has room again (`free_mb` of it): jobs paused because it was full are
    queued to go on from their newest checkpoint."""
    waiting = select(Job).where(Job.status == PAUSED, Job.waiting_for_disk)
    resumed = []
    room = said("the disk has room again: {free} MB free", free=free_mb)
    for job in session.scalars(waiting):
        _requeue(session, job, room)
        resumed.append(job.id)
    return resumed
