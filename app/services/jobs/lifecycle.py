"""Jobs, as their users see them: create, read, cancel, pause, resume, delete.

Every status change goes through `transition`, which applies a move of the domain's table
(app/jobs/status.py); the worker's side (claims, events, endings, recovery) is in
runs.py and uses the same function.
"""

import re
import shutil
from typing import Protocol

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.errors import NotFoundError
from app.core.language import Sentence, said, tr
from app.core.storage import Storage, new_key, write_atomic
from app.db.base import utcnow
from app.db.models import Job, JobCurvePoint, JobEvent, User
from app.db.paging import cursor_page
from app.db.session import undo_unless_committed
from app.graders.spec import AnyGrader
from app.jobs.status import (
    PAUSED,
    QUEUED,
    RUNNING,
    JobAction,
    JobStatus,
    Move,
    move,
    require,
)
from app.ml.device import DevicePlan
from app.ml.events import EventData, Level, Progress
from app.ml.training.judges import JudgeModel
from app.schemas.jobs import JobCreate
from app.services.datasets.qa_parsing import write_jsonl
from app.services.jobs import base_models, estimates, lineage
from app.services.jobs.lineage import StartingPoint
from app.services.jobs.trained_models import require_model
from app.services.jobs.training_data import (
    base_model_of,
    check_base_model,
    training_method,
    training_pairs,
    validation_pairs,
)


class GraderCheck(Protocol):
    """What checks a reinforcement job's grader for its owner (services/evals/graders.py's
    Graders; named here as a protocol: graders asks through serving, which reads jobs)."""

    def judges_for(self, session: Session, user: User, grader: AnyGrader) -> list[JudgeModel]:
        """The judge models the grader names, resolved for the user; BadRequest if one
        is not theirs, or python graders are off."""
        ...


def transition(job: Job, target: JobStatus, *, worker_id: str | None = None) -> Move:
    """Change the job's status by the table, with everything that changes with it."""
    change = move(job.id, job.status, target, now=utcnow(), worker_id=worker_id)
    job.status = change.status
    for field, value in change.values.items():
        setattr(job, field, value)
    if change.new_attempt:
        job.attempts += 1
    return change


def add_event(
    session: Session, job: Job, level: Level, message: Sentence, data: EventData | None = None
) -> JobEvent:
    """The job's next event: its message kept in English and as a sentence to be read in
    each reader's language."""
    seq = (session.scalar(select(func.max(JobEvent.seq)).where(JobEvent.job_id == job.id)) or 0) + 1
    event = JobEvent(
        job_id=job.id, seq=seq, level=level, message=message.english(), said=message, data=data
    )
    session.add(event)
    if isinstance(data, Progress):  # its figures beside it, for the chart (job_series.py)
        session.add(
            JobCurvePoint(
                job_id=job.id,
                seq=seq,
                step=data.step,
                loss=data.loss,
                reward_margin=data.reward_margin,
                reward_mean=data.reward_mean,
            )
        )
    return event


def resumes_from(job: Job) -> Sentence:
    """Where the job's next run starts: its newest checkpoint, or the start."""
    if job.checkpoint_step:
        return said("step {step}", step=job.checkpoint_step)
    return said("the start")


# ------------------------------------------------------------------------------ creating
def create_job(
    session: Session,
    *,
    user: User,
    storage: Storage,
    settings: Settings,
    device_plan: DevicePlan,
    request: JobCreate,
    graders: GraderCheck | None = None,
) -> Job:
    """Check the request (the model for this user, the data, the grader, that it fits here)
    and queue the job, with its own copy of the pairs. `graders`: what checks a
    reinforcement job's grader (python graders on, judge models this user may use)."""
    request, start = lineage.continued_request(session, user=user, storage=storage, request=request)
    base_model = base_model_of(request, settings)
    check_base_model(base_model, user=user, settings=settings)
    pairs, dataset_id = training_pairs(session, user=user, storage=storage, request=request)
    method = training_method(request, pairs)
    judges = []
    if request.grader is not None:
        assert graders is not None, "a reinforcement job's grader is checked by Graders"
        judges = graders.judges_for(session, user, request.grader)
    validation = validation_pairs(session, user=user, storage=storage, request=request)
    hyperparameters = request.hyperparameters
    if validation:
        hyperparameters = hyperparameters.model_copy(update={"validation_split": 0.0})
    expected = estimates.check_fit_and_time(session, request, pairs, settings, device_plan)
    base_models.refuse_if_unreachable(base_model, settings=settings, storage=storage)
    key = new_key()
    undo_unless_committed(session, lambda: storage.remove_job_files(key))
    # The job trains on its own copy: deleting or replacing the dataset later changes nothing.
    write_atomic(storage.job_train_file(key), write_jsonl(pairs))
    if validation:
        write_atomic(storage.job_validation_file(key), write_jsonl(validation))
    if start is not None:
        lineage.copy_starting_adapter(start, storage.start_adapter_dir(key))
        learned = storage.job_train_file(start.job.storage_key)
        if learned.is_file():  # its own copy: the parent deleted later changes nothing
            shutil.copyfile(learned, storage.job_keep_file(key))
    job = Job(
        owner_id=user.id,
        dataset_id=dataset_id,
        validation_dataset_id=request.validation_dataset_id,
        name=request.name
        or default_name(method, base_model, start, suffix=request.suffix, count=len(pairs)),
        suffix=request.suffix,
        labels=request.metadata,
        base_model=base_model,
        method=method,
        grader=request.grader,
        judges=judges or None,
        parent_job_id=start.job.id if start else None,
        start_model=start.model if start else None,
        status=QUEUED,
        hyperparameters=hyperparameters,
        num_examples=len(pairs),
        storage_key=key,
        estimated_run_seconds=expected,
    )
    session.add(job)
    session.flush()
    on = said("{model}, trained further", model=start.model) if start else base_model
    what = {
        "dpo": said("preference pairs (DPO)"),
        "reinforcement": said("prompts (reinforcement)"),
    }.get(method, said("QA pairs"))
    add_event(
        session,
        job,
        "INFO",
        said("Job queued: {count} {what} on {on}", count=len(pairs), what=what, on=on),
    )
    return job


METHOD_NAMES = {"supervised": "SFT", "dpo": "DPO", "reinforcement": "RFT"}
UNITS = {"supervised": "pairs", "dpo": "preference pairs", "reinforcement": "prompts"}


def default_name(
    method: str, base_model: str, start: StartingPoint | None, *, suffix: str | None, count: int
) -> str:
    """What a job is called unless named: its suffix, method and what it started from
    ("kiki: DPO on faq (job 3), 40 preference pairs"); every job from one base was once
    "builtin:tiny on N pairs", alike in every list."""
    if start is not None:
        origin = f"job {start.job.id}"
        origin = f"{start.job.suffix} ({origin})" if start.job.suffix else origin
    else:
        origin = base_model.split("/")[-1]
    name = f"{METHOD_NAMES.get(method, method)} on {origin}, {count} {UNITS.get(method, 'records')}"
    return (f"{suffix}: {name}" if suffix else name)[:200]


# ------------------------------------------------------------------------------- reading
def visible_jobs(user: User) -> Select[Job]:
    query = select(Job)
    return query if user.is_admin else query.where(Job.owner_id == user.id)


def get_job(session: Session, *, user: User, job_id: int) -> Job:
    job = session.scalar(visible_jobs(user).where(Job.id == job_id))
    if job is None:
        raise NotFoundError(tr("Job {job_id} not found; GET /jobs lists yours", job_id=job_id))
    return job


def list_jobs(
    session: Session, *, user: User, status: JobStatus | None, limit: int, offset: int
) -> tuple[list[Job], int]:
    query = visible_jobs(user)
    if status:
        query = query.where(Job.status == status)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    items = session.scalars(query.order_by(Job.id.desc()).limit(limit).offset(offset))
    return list(items), total


PLAIN_LABEL = re.compile(r"^[\w.\- ]{1,64}$")


def page(
    session: Session,
    *,
    user: User,
    before: int | None,
    limit: int,
    labels: dict[str, str] | None = None,
) -> tuple[list[Job], bool]:
    """Newest first: up to `limit` jobs older than job `before` (with all of `labels`, if
    given), and whether more follow."""
    query = visible_jobs(user)
    if labels and all(PLAIN_LABEL.match(key) for key in labels):
        # In the database (SQLite's json_extract, PostgreSQL's ->>): a scan of every job in
        # Python took 8 ms for 10 jobs and 150 ms for 2,000.
        for key, value in labels.items():
            query = query.where(Job.labels[key].as_string() == value)
        labels = None
    if not labels:
        return cursor_page(session, query, Job.id, after=before, limit=limit, newest_first=True)
    # A key a JSON path cannot quote (SQLite's has no escapes): matched here, a page at a time.
    if before is not None:
        query = query.where(Job.id < before)
    found = []
    for job in session.scalars(query.order_by(Job.id.desc()).execution_options(yield_per=100)):
        if labels.items() <= (job.labels or {}).items():
            found.append(job)
            if len(found) > limit:
                break
    return found[:limit], len(found) > limit


def events_page(
    session: Session, *, job: Job, before: int | None, limit: int
) -> tuple[list[JobEvent], bool]:
    """Newest first: up to `limit` events before event `before`, and whether more follow."""
    query = select(JobEvent).where(JobEvent.job_id == job.id)
    return cursor_page(session, query, JobEvent.seq, after=before, limit=limit, newest_first=True)


def list_events(
    session: Session, *, job: Job, after: int, limit: int, before: int | None = None
) -> list[JobEvent]:
    """Up to `limit` events in order: the first after `after`, or the last before `before`."""
    query = select(JobEvent).where(JobEvent.job_id == job.id, JobEvent.seq > after)
    if before is None:
        return list(session.scalars(query.order_by(JobEvent.seq).limit(limit)))
    newest = query.where(JobEvent.seq < before).order_by(JobEvent.seq.desc()).limit(limit)
    return list(reversed(list(session.scalars(newest))))


def jobs_with_models(session: Session, *, user: User) -> list[Job]:
    """The user's jobs whose trained model can be used (has_model), newest first."""
    return list(session.scalars(_with_models(user).order_by(Job.id.desc())))


def has_model_on(session: Session, *, user: User, base_model: str) -> bool:
    """Whether one of the user's usable models is tuned from `base_model` (one row read,
    not all their jobs: asked on every request that names a model)."""
    query = _with_models(user).where(Job.base_model == base_model).limit(1)
    return session.scalar(query.with_only_columns(Job.id)) is not None


def _with_models(user: User) -> Select[Job]:
    return visible_jobs(user).where(
        Job.status == JobStatus.SUCCEEDED, Job.model_deleted_at.is_(None)
    )


# ----------------------------------------------------------------------- what users do
def cancel_job(session: Session, *, user: User, job_id: int) -> Job:
    """A queued or paused job ends now; a running one stops within seconds. Asked again
    while it stops, nothing more happens."""
    job = get_job(session, user=user, job_id=job_id)
    if job.status == RUNNING and job.cancel_requested:
        return job
    require(job, JobAction.CANCEL)
    if job.status == RUNNING:
        job.cancel_requested = True
        add_event(session, job, "INFO", said("Cancel requested; stopping within a few seconds"))
    else:
        was_said = said("queued") if job.status == QUEUED else said("paused")
        transition(job, JobStatus.CANCELLED)
        add_event(session, job, "INFO", said("Cancelled while {status}", status=was_said))
    return job


def pause_job(session: Session, *, user: User, job_id: int) -> Job:
    """A queued job waits; a running one stops at a checkpoint within seconds. Asked again
    while it stops, nothing more happens."""
    job = get_job(session, user=user, job_id=job_id)
    if job.status == RUNNING and job.pause_requested and not job.cancel_requested:
        return job
    require(job, JobAction.PAUSE)
    if job.status == RUNNING:
        job.pause_requested = True
        add_event(session, job, "INFO", said("Pause requested; saving a checkpoint and stopping"))
    else:
        transition(job, PAUSED)
        add_event(
            session, job, "INFO", said("Paused before it started; resume it to queue it again")
        )
    return job


def resume_job(session: Session, *, user: User, job_id: int) -> Job:
    """Back to the queue; it continues from its newest checkpoint."""
    job = get_job(session, user=user, job_id=job_id)
    require(job, JobAction.RESUME)
    transition(job, QUEUED)
    add_event(
        session,
        job,
        "INFO",
        said("Resumed: queued to continue from {where}", where=resumes_from(job)),
    )
    return job


def delete_job(session: Session, *, user: User, storage: Storage, job_id: int) -> Job:
    """The job, its events and every file of it (serving forgets its model: serving.py)."""
    job = get_job(session, user=user, job_id=job_id)
    require(job, JobAction.DELETE)
    session.delete(job)
    session.flush()
    storage.remove_job_files(job.storage_key)
    return job


def delete_model(session: Session, *, user: User, storage: Storage, job_id: int) -> Job:
    """Remove a finished job's trained model (adapter, checkpoints, exports); the job stays."""
    job = get_job(session, user=user, job_id=job_id)
    require_model(job)
    job.model_deleted_at = utcnow()
    add_event(session, job, "INFO", said("The trained model was deleted"))
    session.flush()
    for directory in (
        storage.adapter_dir(job.storage_key),
        storage.checkpoints_dir(job.storage_key),
        storage.exports_dir(job.storage_key),
    ):
        shutil.rmtree(directory, ignore_errors=True)
    return job
