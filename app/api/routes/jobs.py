"""/jobs: create, estimate, list, read, follow, cancel, pause, resume and delete jobs.

A job's trained model (ask it, download it, export it) is in job_models.py.
"""

import json
from collections.abc import AsyncIterator
from dataclasses import asdict
from typing import Annotated, Any, cast

from fastapi import APIRouter, Header, Query, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse
from sqlalchemy.orm import Session
from starlette.types import Receive, Scope, Send

from app.api.deps import (
    MAX_ID,
    CurrentUser,
    JobsDep,
    ResourceId,
    RuntimeDep,
    ServingDep,
    SessionDep,
)
from app.api.openapi import errors
from app.core.disk import DiskLevel
from app.core.names import number_in_digits
from app.db.models import Job, JobEvent
from app.jobs.status import JobStatus, actions, has_model
from app.schemas.common import Page
from app.schemas.jobs import (
    EventOut,
    JobCreate,
    JobEstimate,
    JobOut,
    LogFeed,
    MessageOnly,
    Method,
    Progress,
    ProgressSeriesOut,
    SeriesPointOut,
)
from app.services import openai_ids
from app.services.jobs import lifecycle as jobs_service
from app.services.jobs import queue
from app.services.jobs.estimates import Estimate
from app.services.jobs.feed import FeedEvent, StreamSlot
from app.services.jobs.series import progress_series

router = APIRouter(prefix="/jobs", tags=["jobs"])


def jobs_out(session: Session, jobs: list[Job], *, disk_full: bool = False) -> list[JobOut]:
    """The jobs as the API shows them, each queued one with its place in the line."""
    places = queue.places(session, jobs)
    return [to_out(job, disk_full=disk_full, place=places.get(job.id)) for job in jobs]


def job_out(session: Session, job: Job, *, disk_full: bool = False) -> JobOut:
    return jobs_out(session, [job], disk_full=disk_full)[0]


def to_out(job: Job, *, disk_full: bool, place: queue.Place | None) -> JobOut:
    """The job as the API shows it; `disk_full`: the data directory's disk is full now, so a
    running job waits for it (its end cannot be written until there is room); `place`: a
    queued job's in the line."""
    total = job.total_steps
    done = job.status == JobStatus.SUCCEEDED
    percent = 100.0 if done else (100.0 * job.step / total if total else 0.0)
    return JobOut(
        id=job.id,
        name=job.name,
        status=JobStatus(job.status),
        jobs_ahead=place.ahead if place else None,
        estimated_run_seconds=job.estimated_run_seconds,
        starts_in_seconds=place.starts_in_seconds if place else None,
        owner=job.owner.username,
        base_model=job.base_model,
        method=cast(Method, job.method),
        grader=job.grader,
        base_job_id=job.parent_job_id,
        start_model=job.start_model,
        dataset_id=job.dataset_id,
        num_examples=job.num_examples,
        fine_tuned_model=openai_ids.model_id(job) if has_model(job) else None,
        suffix=job.suffix,
        metadata=job.labels,
        validation_dataset_id=job.validation_dataset_id,
        hyperparameters=job.hyperparameters,
        resolved_hyperparameters=job.resolved_hyperparameters,
        progress=Progress(
            step=job.step,
            total_steps=total,
            epoch=job.epoch,
            expected_epochs=job.metrics.expected_epochs,
            percent=round(percent, 1),
            eta_seconds=job.eta_seconds,
        ),
        metrics=job.metrics,
        outcome=job.metrics.outcome() if done else None,
        plan=job.plan,
        device=job.device,
        dtype=job.dtype,
        error=job.error_text(),
        attempts=job.attempts,
        failures=job.failures,
        checkpoint_step=job.checkpoint_step,
        cancel_requested=job.cancel_requested,
        pause_requested=job.pause_requested,
        waiting_for_disk=job.waiting_for_disk or (disk_full and job.status == JobStatus.RUNNING),
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        actions=actions(job),
    )


def event_out(event: JobEvent | FeedEvent) -> EventOut:
    return EventOut(
        seq=event.seq,
        ts=event.ts,
        level=event.level,
        message=event.text(),
        data=event.data or MessageOnly(),
    )


@router.post("", status_code=status.HTTP_201_CREATED, responses=errors(400, 403, 404, 409))
def create_job(body: JobCreate, user: CurrentUser, session: SessionDep, jobs: JobsDep) -> JobOut:
    return job_out(session, jobs.create(session, user, body))


@router.post("/estimate", responses=errors(403, 404, 409))
def estimate_job(
    body: JobEstimate, user: CurrentUser, session: SessionDep, jobs: JobsDep
) -> Estimate:
    """The memory plan for this job, here or on `target` ({device, memory_gb})."""
    request = JobCreate.model_validate(body.model_dump(exclude={"target"}, exclude_none=True))
    return jobs.estimate(session, user, request, body.target)


@router.get("")
def list_jobs(
    user: CurrentUser,
    session: SessionDep,
    runtime: RuntimeDep,
    status: JobStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
) -> Page[JobOut]:
    items, total = jobs_service.list_jobs(
        session, user=user, status=status, limit=limit, offset=offset
    )
    full = runtime.disk().level == DiskLevel.FULL
    items_out = jobs_out(session, items, disk_full=full)
    return Page(items=items_out, total=total, limit=limit, offset=offset)


@router.get("/{job_id:int}")
def get_job(
    job_id: ResourceId, user: CurrentUser, session: SessionDep, runtime: RuntimeDep
) -> JobOut:
    job = jobs_service.get_job(session, user=user, job_id=job_id)
    return job_out(session, job, disk_full=runtime.disk().level == DiskLevel.FULL)


@router.get("/{job_id:int}/logs")
def job_logs(
    job_id: ResourceId,
    user: CurrentUser,
    session: SessionDep,
    after: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
    before: Annotated[
        int | None,
        Query(ge=1, le=MAX_ID, description="the `limit` events just before this seq instead"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> LogFeed:
    """The job's events in order: those after `after`, or the last `limit` before `before`
    (a long job's log read backwards, a page at a time)."""
    job = jobs_service.get_job(session, user=user, job_id=job_id)
    events = jobs_service.list_events(session, job=job, after=after, before=before, limit=limit)
    return LogFeed(
        events=[event_out(e) for e in events],
        next_after=events[-1].seq if events else after,
        status=JobStatus(job.status),
    )


@router.get("/{job_id:int}/series")
def job_series(
    job_id: ResourceId,
    user: CurrentUser,
    session: SessionDep,
    points: Annotated[int, Query(ge=10, le=5000)] = 600,
) -> ProgressSeriesOut:
    """The training curves (loss; DPO's reward margin; reinforcement's reward), averaged
    into at most `points` buckets of steps, for a chart of a job of any length."""
    job = jobs_service.get_job(session, user=user, job_id=job_id)
    series = progress_series(session, job=job, points=points)
    return ProgressSeriesOut(
        points=[SeriesPointOut(**asdict(point)) for point in series.points],
        steps_read=series.steps_read,
        through=series.through,
        latest=series.latest,
    )


@router.get(
    "/{job_id:int}/logs/stream",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "server-sent events"},
        **errors(429),
    },
)
async def stream_job_logs(
    job_id: ResourceId,
    user: CurrentUser,
    session: SessionDep,
    runtime: RuntimeDep,
    after: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
    last_event_id: Annotated[str | None, Header(max_length=20)] = None,
) -> StreamingResponse:
    """Server-sent events: one `log` event per job event, then `end` when the job is over."""

    # 404 before streaming starts; off the event loop, on the request's own connection (a
    # second one while this one is held is how a flood of requests exhausts a pool).
    await run_in_threadpool(jobs_service.get_job, session, user=user, job_id=job_id)
    if last_event_id and (seen := number_in_digits(last_event_id, max_digits=20)) is not None:
        after = max(after, min(seen, MAX_ID))
    feed = runtime.job_feed
    slot = feed.reserve(user_id=user.id)  # 429 here, before the stream starts

    async def events() -> AsyncIterator[str]:
        first = True
        async for update in feed.follow(slot=slot, job_id=job_id, after=after):
            if first:
                yield "retry: 2000\n\n"
                first = False
            for event in update.events:
                out = event_out(event)
                yield f"id: {event.seq}\nevent: log\ndata: {out.model_dump_json()}\n\n"
            if update.final:
                end = {"status": update.status}
                if update.closing:  # the job goes on after a restart: reconnect then
                    end["reason"] = "the service is stopping; reconnect with Last-Event-ID"
                yield f"event: end\ndata: {json.dumps(end)}\n\n"
            elif not update.events:
                yield ": keep-alive\n\n"

    return SlotStream(
        slot,
        events(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


class SlotStream(StreamingResponse):
    """A stream that gives its user's place back however it ends, even before it began (a
    client that left at once) or with its sending cut (a client gone mid-stream)."""

    def __init__(self, slot: StreamSlot, content: AsyncIterator[str], **options: Any) -> None:
        super().__init__(content, **options)
        self.slot = slot

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.slot.release()


@router.post("/{job_id:int}/cancel", responses=errors(409))
def cancel_job(job_id: ResourceId, user: CurrentUser, session: SessionDep) -> JobOut:
    return job_out(session, jobs_service.cancel_job(session, user=user, job_id=job_id))


@router.post("/{job_id:int}/pause", responses=errors(409))
def pause_job(job_id: ResourceId, user: CurrentUser, session: SessionDep) -> JobOut:
    """Queued: held back. Running: stops at a checkpoint within seconds."""
    return job_out(session, jobs_service.pause_job(session, user=user, job_id=job_id))


@router.post("/{job_id:int}/resume", responses=errors(409))
def resume_job(job_id: ResourceId, user: CurrentUser, session: SessionDep) -> JobOut:
    """A paused job goes back to the queue and continues from its newest checkpoint."""
    return job_out(session, jobs_service.resume_job(session, user=user, job_id=job_id))


@router.delete("/{job_id:int}", status_code=status.HTTP_204_NO_CONTENT, responses=errors(409))
def delete_job(
    job_id: ResourceId, user: CurrentUser, session: SessionDep, serving: ServingDep
) -> None:
    """The job, its events, its model and every export of it."""
    serving.delete_job(session, user, job_id)
