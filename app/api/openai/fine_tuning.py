"""/v1/fine_tuning/jobs: qatune's jobs, created and driven through OpenAI's API.

A thin translation: the job is made by services/jobs.create_job from a JobCreate and lives
in the same state machine as a native one (the native API and the UI show it too).
"""

import math
import re
from datetime import timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, status
from pydantic import ValidationError

from app.api.deps import CurrentUser, JobsDep, ServingDep, SessionDep
from app.api.openai.files import get_file
from app.api.openai.methods import method_of, reinforcement_asked
from app.api.openapi import errors
from app.core.errors import BadRequest, DataMismatch, NotFoundError, ValidationFailed
from app.core.language import tr
from app.db.base import utcnow
from app.db.models import Job, JobEvent, User
from app.jobs.status import JobStatus, has_model
from app.schemas.jobs import JobCreate
from app.schemas.openai.common import CursorPage
from app.schemas.openai.fine_tuning import (
    Checkpoint,
    CheckpointMetrics,
    DpoHyperparameters,
    Event,
    FineTuningJob,
    FineTuningJobCreate,
    Hyperparameters,
    JobError,
    StepMetrics,
    ValidationMetrics,
    event_data,
)
from app.services import openai_ids
from app.services.jobs import lifecycle as jobs_service
from app.services.jobs import queue

router = APIRouter(prefix="/fine_tuning/jobs")
# A native field named in a refusal, as the OpenAI request calls it.
OPENAI_PARAMS = {
    "base_model": "model",
    "base_job_id": "model",
    "method": "method.type",
    "messages": "training_file",
    "epochs": "hyperparameters.n_epochs",
    "beta": "method.dpo.hyperparameters.beta",
    "grader": "method.reinforcement.grader",
    "group_size": "method.reinforcement.hyperparameters.compute_multiplier",
    "eval_interval": "method.reinforcement.hyperparameters.eval_interval",
    "eval_samples": "method.reinforcement.hyperparameters.eval_samples",
    "quantization": "hyperparameters.quantization",
}
# OpenAI's own models and fine-tunes of them: a script moved here with its model name left in
OPENAI_MODEL = re.compile(r"^(ft:)?(gpt-|o[1-9]|chatgpt|davinci|babbage|text-)", re.IGNORECASE)
LEVELS = {"DEBUG": "info", "INFO": "info", "WARNING": "warn", "ERROR": "error"}


def _seconds(moment: Any) -> int | None:
    return int(moment.timestamp()) if moment is not None else None


def to_job(job: Job) -> FineTuningJob:
    asked, resolved = job.hyperparameters, job.resolved_hyperparameters
    epochs: int | Literal["auto"] = resolved.epochs if resolved else asked.epochs
    if resolved and resolved.until_learned and job.metrics.epochs is not None:
        epochs = max(1, math.ceil(job.metrics.epochs))  # the passes it took so far
    hyperparameters = Hyperparameters(
        n_epochs=epochs,
        batch_size=resolved.batch_size if resolved else asked.batch_size,
        learning_rate_multiplier=asked.learning_rate_multiplier,
        quantization=resolved.quantization if resolved else asked.quantization,
    )
    now, left = utcnow(), None
    if job.status == JobStatus.RUNNING and job.started_at is not None:
        elapsed = (now - job.started_at).total_seconds()  # counted as the queue counts it
        left = queue.time_left(job.eta_seconds, job.estimated_run_seconds, elapsed)
    finish = now + timedelta(seconds=left) if left is not None else None
    usable = has_model(job)
    return FineTuningJob(
        id=openai_ids.JOB.of(job.id),
        created_at=int(job.created_at.timestamp()),
        error=(
            JobError(code="training_failed", message=job.error_text() or "failed")
            if job.status == JobStatus.FAILED
            else None
        ),
        fine_tuned_model=openai_ids.model_id(job) if usable else None,
        finished_at=_seconds(job.finished_at),
        hyperparameters=hyperparameters,
        model=job.start_model or job.base_model,
        organization_id=f"user-{job.owner.username}",
        result_files=[],
        seed=asked.seed,
        status=JobStatus(job.status),
        trained_tokens=job.metrics.train_tokens if usable else None,
        training_file=openai_ids.FILE.of(job.dataset_id) if job.dataset_id else None,
        validation_file=(
            openai_ids.FILE.of(job.validation_dataset_id) if job.validation_dataset_id else None
        ),
        estimated_finish=_seconds(finish),
        metadata=job.labels,
        method=method_of(job, hyperparameters),
    )


def _file(session: SessionDep, user: User, name: str, field: str) -> int:
    try:
        dataset = get_file(session, user, name)
    except NotFoundError:
        raise BadRequest(
            tr(
                "{field} {name!r} is not one of your files; upload it with POST /v1/files",
                field=field,
                name=name[:40],
            ),
            param=field,
        ) from None
    if dataset.purpose != "fine-tune":
        raise BadRequest(
            tr("{field} {name!r} was not uploaded for fine-tune", field=field, name=name),
            param=field,
        )
    return dataset.id


def _not_here(model: str, offered: list[str]) -> BadRequest:
    """A model name this service has no model of: what it has instead."""
    values = {"model": model[:100], "offered": ", ".join(offered)}
    if OPENAI_MODEL.match(model):
        message = tr(
            "{model} is OpenAI's model, which is not served here; start from one of these "
            "instead: {offered}, or one of your fine-tuned models (GET /v1/models lists them)",
            **values,
        )
    else:
        message = tr(
            "{model} is not a model here; start from one of these: {offered}, or one of your "
            "fine-tuned models (GET /v1/models lists them)",
            **values,
        )
    return BadRequest(message, param="model")


def _job_create(
    body: FineTuningJobCreate, session: SessionDep, user: User, offered: list[str]
) -> JobCreate:
    """The same job a native POST /jobs makes, from OpenAI's request."""
    method = body.method.type if body.method else "supervised"
    chosen = body.method
    given = (
        {
            "supervised": chosen.supervised,
            "dpo": chosen.dpo,
            "reinforcement": chosen.reinforcement,
        }[method]
        if chosen
        else None
    )
    asked = given.hyperparameters if given else body.hyperparameters or Hyperparameters()
    grader, extra = reinforcement_asked(chosen) if method == "reinforcement" else ({}, {})
    beta = asked.beta if isinstance(asked, DpoHyperparameters) else "auto"
    # An ft: model (or one of its checkpoints) is trained further, as on OpenAI.
    start = openai_ids.parse_model_id(body.model)
    if not start and OPENAI_MODEL.match(body.model):
        raise _not_here(body.model, offered)
    model = (
        {"base_job_id": start.job_id}
        | ({"base_checkpoint_step": start.checkpoint_step} if start.checkpoint_step else {})
        if start
        else {"base_model": body.model}
    )
    try:
        return JobCreate(
            **model,
            dataset_id=_file(session, user, body.training_file, "training_file"),
            **(
                {
                    "validation_dataset_id": _file(
                        session, user, body.validation_file, "validation_file"
                    )
                }
                if body.validation_file
                else {}
            ),
            **({"suffix": body.suffix} if body.suffix else {}),
            **({"metadata": body.metadata} if body.metadata else {}),
            method=method,
            **grader,
            hyperparameters={
                "epochs": asked.n_epochs,
                "batch_size": asked.batch_size,
                "learning_rate_multiplier": asked.learning_rate_multiplier,
                "beta": beta,
                "quantization": asked.quantization,
                **extra,
                **({"seed": body.seed} if body.seed is not None else {}),
            },
        )
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or "model"
        if field == "base_model":
            raise _not_here(body.model, offered) from exc
        raise BadRequest(
            tr("{field}: {error}", field=field, error=error["msg"]),
            param=field.replace("base_model", "model"),
        ) from exc


@router.post("", status_code=status.HTTP_200_OK, responses=errors(400, 403, 404, 409))
def create_job(
    body: FineTuningJobCreate,
    user: CurrentUser,
    session: SessionDep,
    jobs: JobsDep,
    serving: ServingDep,
) -> FineTuningJob:
    """Queue a job; files are checked now, so it never waits in `validating_files`."""
    if body.integrations:  # before anything is made
        raise BadRequest(
            tr(
                "integrations ({types}) are not supported by qatune: leave them out; a job's "
                "metrics are its events (GET /v1/fine_tuning/jobs/{{id}}/events) and the job "
                "page's charts",
                types=", ".join(str(i.get("type", "?"))[:20] for i in body.integrations),
            ),
            param="integrations",
        )
    try:
        request = _job_create(body, session, user, [o.name for o in serving.offers()])
        job = jobs.create(session, user, request)
    except (ValidationFailed, DataMismatch) as exc:  # OpenAI's 400, in its own words
        field = str((exc.details or [{}])[0].get("field") or "training_file")
        param = OPENAI_PARAMS.get(field.split(".")[-1], field)
        raise BadRequest(exc.message, param=param, details=exc.details) from exc
    except BadRequest as exc:  # the grader's checks name its fields from `grader`
        if not (exc.param or "").startswith("grader"):
            raise
        raise BadRequest(exc.message, param=f"method.reinforcement.{exc.param}") from exc
    session.flush()
    return to_job(job)


def get_job(session: SessionDep, user: User, job_name: str) -> Job:
    return openai_ids.JOB.find(
        job_name, lambda number: jobs_service.get_job(session, user=user, job_id=number)
    )


@router.get("", responses=errors(400))
def list_jobs(
    request: Request,
    user: CurrentUser,
    session: SessionDep,
    after: Annotated[str | None, Query(max_length=40)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> CursorPage[FineTuningJob]:
    """Your jobs, newest first; `after` is the last id of the page before; `metadata[k]=v`
    (as the official client sends `metadata={...}`) keeps the jobs with those labels."""
    before = openai_ids.JOB.after(after)
    labels = {
        key[len("metadata[") : -1]: value[:512]
        for key, value in request.query_params.multi_items()
        if key.startswith("metadata[") and key.endswith("]")
    }
    found, more = jobs_service.page(session, user=user, before=before, limit=limit, labels=labels)
    return CursorPage.of([to_job(job) for job in found], more)


@router.get("/{job_name}")
def retrieve_job(job_name: str, user: CurrentUser, session: SessionDep) -> FineTuningJob:
    return to_job(get_job(session, user, job_name))


@router.post("/{job_name}/cancel", responses=errors(409))
def cancel_job(job_name: str, user: CurrentUser, session: SessionDep) -> FineTuningJob:
    job = get_job(session, user, job_name)
    return to_job(jobs_service.cancel_job(session, user=user, job_id=job.id))


@router.post("/{job_name}/pause", responses=errors(409))
def pause_job(job_name: str, user: CurrentUser, session: SessionDep) -> FineTuningJob:
    """Queued: held back. Running: stops at a checkpoint within seconds."""
    job = get_job(session, user, job_name)
    return to_job(jobs_service.pause_job(session, user=user, job_id=job.id))


@router.post("/{job_name}/resume", responses=errors(409))
def resume_job(job_name: str, user: CurrentUser, session: SessionDep) -> FineTuningJob:
    """A paused job is queued to continue from its newest checkpoint."""
    job = get_job(session, user, job_name)
    return to_job(jobs_service.resume_job(session, user=user, job_id=job.id))


def to_event(event: JobEvent) -> Event:
    data = event_data(event.data)
    return Event(
        id=openai_ids.EVENT.of(event.job_id, event.seq),
        created_at=int(event.ts.timestamp()),
        level=LEVELS.get(event.level, "info"),
        message=event.text(),
        type="metrics" if isinstance(data, StepMetrics | ValidationMetrics) else "message",
        data=data,
    )


@router.get("/{job_name}/events", responses=errors(400))
def list_events(
    job_name: str,
    user: CurrentUser,
    session: SessionDep,
    after: Annotated[str | None, Query(max_length=60)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 20,
) -> CursorPage[Event]:
    """The job's events, newest first; `after` is the last id of the page before."""
    job = get_job(session, user, job_name)
    before = openai_ids.EVENT.after(after, job.id)
    found, more = jobs_service.events_page(session, job=job, before=before, limit=limit)
    return CursorPage.of([to_event(e) for e in found], more)


@router.get("/{job_name}/checkpoints", responses=errors(400))
def list_checkpoints(
    job_name: str,
    user: CurrentUser,
    session: SessionDep,
    jobs: JobsDep,
    after: Annotated[str | None, Query(max_length=60)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
) -> CursorPage[Checkpoint]:
    """The job's saved checkpoints, newest first; each is a model you can ask."""
    job = get_job(session, user, job_name)
    saved = list(reversed(jobs.checkpoints(job)))
    before = openai_ids.CHECKPOINT.after(after, job.id)
    if before is not None:
        saved = [c for c in saved if c.step < before]
    shown = [
        Checkpoint(
            id=openai_ids.CHECKPOINT.of(job.id, c.step),
            created_at=int(c.created_at.timestamp()),
            fine_tuned_model_checkpoint=openai_ids.checkpoint_model_id(job, c.step),
            fine_tuning_job_id=openai_ids.JOB.of(job.id),
            metrics=CheckpointMetrics(step=c.step, train_loss=c.train_loss),
            step_number=c.step,
        )
        for c in saved[:limit]
    ]
    return CursorPage.of(shown, len(saved) > limit)
