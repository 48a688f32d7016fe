import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Response, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse

from app.api.deps import MAX_ID, CurrentUser, ResourceId, RuntimeDep, SessionDep
from app.api.openapi import errors
from app.core.errors import NotFoundError, ValidationFailed
from app.db.models import Job, JobStatus
from app.ml.builtin import is_builtin
from app.ml.export import DEFAULT_GGUF_TYPE, GgufType
from app.ml.models import ModelUnavailable, resolve_model_dir
from app.ml.training.adapter_files import answer_budget, read_adapter_metadata, read_evaluation
from app.ml.training.metrics import EvaluationReport
from app.schemas.jobs import (
    CheckpointOut,
    EventOut,
    EventPage,
    ExportOut,
    JobCreate,
    JobEstimate,
    JobOut,
    JobPage,
    Progress,
    QueryIn,
    QueryOut,
)
from app.services import estimates, openai_ids
from app.services import jobs as jobs_service
from app.services.exports import (
    KINDS,
    BaseWeights,
    ExportFormat,
    ExportKind,
    ExportSource,
    ExportState,
    ExportStatus,
    estimated_bytes,
    zip_folder,
)

router = APIRouter(prefix="/jobs", tags=["jobs"])


def to_out(job: Job) -> JobOut:
    total = job.total_steps
    percent = (
        100.0 if job.status == JobStatus.SUCCEEDED else (100.0 * job.step / total if total else 0.0)
    )
    return JobOut(
        id=job.id,
        name=job.name,
        status=job.status,
        owner=job.owner.username,
        base_model=job.base_model,
        dataset_id=job.dataset_id,
        num_examples=job.num_examples,
        fine_tuned_model=(
            openai_ids.model_id(job)
            if job.status == JobStatus.SUCCEEDED and job.model_deleted_at is None
            else None
        ),
        suffix=job.suffix,
        metadata=job.labels,
        validation_dataset_id=job.validation_dataset_id,
        hyperparameters=job.hyperparameters,
        resolved_hyperparameters=job.resolved_hyperparameters,
        progress=Progress(
            step=job.step,
            total_steps=total,
            epoch=job.epoch,
            percent=round(percent, 1),
            eta_seconds=job.eta_seconds,
        ),
        metrics=job.metrics,
        plan=job.plan,
        device=job.device,
        dtype=job.dtype,
        error=job.error,
        attempts=job.attempts,
        failures=job.failures,
        checkpoint_step=job.checkpoint_step,
        cancel_requested=job.cancel_requested,
        pause_requested=job.pause_requested,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
    )


@router.post("", status_code=status.HTTP_201_CREATED, responses=errors(403, 404, 409))
def create_job(
    body: JobCreate, user: CurrentUser, session: SessionDep, runtime: RuntimeDep
) -> JobOut:
    job = jobs_service.create_job(
        session,
        user=user,
        storage=runtime.storage,
        settings=runtime.settings,
        request=body,
        fit_check=lambda pairs: estimates.refuse_if_it_cannot_fit(
            body, pairs, runtime.settings, runtime.device_plan
        ),
    )
    return to_out(job)


@router.post("/estimate", responses=errors(403, 404, 409))
def estimate_job(
    body: JobEstimate, user: CurrentUser, session: SessionDep, runtime: RuntimeDep
) -> dict[str, Any]:
    """The memory plan for this job, here or on `target` ({device, memory_gb})."""
    request = JobCreate.model_validate(body.model_dump(exclude={"target"}, exclude_none=True))
    return estimates.estimate(
        session,
        user=user,
        storage=runtime.storage,
        settings=runtime.settings,
        request=request,
        device_plan=runtime.device_plan,
        target=body.target,
    )


@router.get("")
def list_jobs(
    user: CurrentUser,
    session: SessionDep,
    status: JobStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
) -> JobPage:
    items, total = jobs_service.list_jobs(
        session, user=user, status=status, limit=limit, offset=offset
    )
    return JobPage(items=[to_out(j) for j in items], total=total, limit=limit, offset=offset)


@router.get("/{job_id:int}")
def get_job(job_id: ResourceId, user: CurrentUser, session: SessionDep) -> JobOut:
    return to_out(jobs_service.get_job(session, user=user, job_id=job_id))


@router.get("/{job_id:int}/logs")
def job_logs(
    job_id: ResourceId,
    user: CurrentUser,
    session: SessionDep,
    after: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> EventPage:
    job = jobs_service.get_job(session, user=user, job_id=job_id)
    events = jobs_service.list_events(session, job=job, after=after, limit=limit)
    return EventPage(
        events=[EventOut.model_validate(e, from_attributes=True) for e in events],
        next_after=events[-1].seq if events else after,
        status=job.status,
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
    if last_event_id and last_event_id.isdigit():
        after = max(after, min(int(last_event_id), MAX_ID))
    feed = runtime.job_feed
    feed.check_room(user_id=user.id)  # 429 here, before the stream starts

    async def events() -> AsyncIterator[str]:
        first = True
        async for update in feed.follow(user_id=user.id, job_id=job_id, after=after):
            if first:  # sent once the stream counts against the user's cap
                yield "retry: 2000\n\n"
                first = False
            for event in update.events:
                out = EventOut(
                    seq=event.seq,
                    ts=event.ts,
                    level=event.level,
                    message=event.message,
                    data=event.data,
                )
                yield f"id: {event.seq}\nevent: log\ndata: {out.model_dump_json()}\n\n"
            if update.final:
                yield f"event: end\ndata: {json.dumps({'status': update.status})}\n\n"
            elif not update.events:
                yield ": keep-alive\n\n"

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@router.post("/{job_id:int}/cancel", responses=errors(409))
def cancel_job(job_id: ResourceId, user: CurrentUser, session: SessionDep) -> JobOut:
    return to_out(jobs_service.cancel_job(session, user=user, job_id=job_id))


@router.post("/{job_id:int}/pause", responses=errors(409))
def pause_job(job_id: ResourceId, user: CurrentUser, session: SessionDep) -> JobOut:
    """Queued: held back. Running: stops at a checkpoint within seconds."""
    return to_out(jobs_service.pause_job(session, user=user, job_id=job_id))


@router.post("/{job_id:int}/resume", responses=errors(409))
def resume_job(job_id: ResourceId, user: CurrentUser, session: SessionDep) -> JobOut:
    """A paused job goes back to the queue and continues from its newest checkpoint."""
    return to_out(jobs_service.resume_job(session, user=user, job_id=job_id))


@router.get("/{job_id:int}/checkpoints")
def list_checkpoints(
    job_id: ResourceId, user: CurrentUser, session: SessionDep, runtime: RuntimeDep
) -> list[CheckpointOut]:
    """The job's saved checkpoints, newest last; each can be asked like the final model."""
    job = jobs_service.get_job(session, user=user, job_id=job_id)
    return [
        CheckpointOut(step=c.step, train_loss=c.train_loss, created_at=c.created_at)
        for c in jobs_service.checkpoints(runtime.storage, job)
    ]


@router.delete("/{job_id:int}", status_code=status.HTTP_204_NO_CONTENT, responses=errors(409))
def delete_job(
    job_id: ResourceId, user: CurrentUser, session: SessionDep, runtime: RuntimeDep
) -> None:
    job = jobs_service.delete_job(session, user=user, storage=runtime.storage, job_id=job_id)
    runtime.query_service.forget_adapter(job.storage_key)
    runtime.exporter.forget(job.storage_key)


@router.get(
    "/{job_id:int}/adapter",
    response_class=Response,
    responses={
        200: {"content": {"application/zip": {}}, "description": "the adapter as a zip"},
        **errors(409),
    },
)
def download_adapter(
    job_id: ResourceId, user: CurrentUser, session: SessionDep, runtime: RuntimeDep
) -> Response:
    """The adapter directory as a zip: load it with peft's PeftModel.from_pretrained."""
    job = jobs_service.get_job(session, user=user, job_id=job_id)
    _, adapter_dir = jobs_service.servable_adapter(runtime.storage, job)
    buffer = io.BytesIO()
    zip_folder(adapter_dir, buffer, f"qatune-job-{job.id}")
    return Response(
        buffer.getvalue(),
        media_type="application/zip",
        headers={"Content-Disposition": f'attachment; filename="qatune-job-{job.id}-adapter.zip"'},
    )


def export_out(job: Job, state: ExportState, estimate: int | None = None) -> ExportOut:
    kind = state.kind
    download = f"/jobs/{job.id}/export?format={kind.format}"
    return ExportOut(
        format=kind.format,
        outtype=kind.outtype,
        status=state.status,
        progress=round(state.progress, 3),
        message=state.message,
        size_bytes=state.size_bytes,
        estimated_bytes=estimate,
        error=state.error,
        download=download + (f"&outtype={kind.outtype}" if kind.outtype else ""),
    )


@router.get("/{job_id:int}/exports", responses=errors(404, 409))
def list_exports(
    job_id: ResourceId, user: CurrentUser, session: SessionDep, runtime: RuntimeDep
) -> list[ExportOut]:
    """Each export of the job's model: not started, running (with progress), ready (with
    its size) or failed (with why); each with about how large it will be."""
    job = jobs_service.get_job(session, user=user, job_id=job_id)
    jobs_service.servable_adapter(runtime.storage, job)
    try:  # from what is on disk only: a listing never downloads a model
        base_dir: Path | None = resolve_model_dir(
            job.base_model,
            cache_dir=runtime.storage.models_dir,
            offline=True,
            configured=tuple(runtime.settings.base_models),
        )
    except ModelUnavailable:
        base_dir = None
    weights = BaseWeights.read(base_dir) if base_dir else None
    with_base = is_builtin(job.base_model)
    return [
        export_out(
            job,
            runtime.exporter.state(job.storage_key, kind),
            estimated_bytes(weights, kind, with_base=with_base) if weights else None,
        )
        for kind in KINDS
    ]


@router.get(
    "/{job_id:int}/export",
    response_class=Response,
    responses={
        200: {"content": {"application/zip": {}}, "description": "the export, ready"},
        202: {"model": ExportOut, "description": "started or still running: ask again"},
        **errors(404, 409),
    },
)
def download_export(
    job_id: ResourceId,
    user: CurrentUser,
    session: SessionDep,
    runtime: RuntimeDep,
    format: Annotated[
        ExportFormat,
        Query(description="merged: base + adapter, safetensors; gguf: llama.cpp / Ollama files"),
    ],
    outtype: Annotated[
        GgufType | None, Query(description="gguf only: the weights' type (default f16)")
    ] = None,
) -> Response:
    """The export once it is ready; until then this starts it (once) and answers 202 with
    its progress: ask the same URL again (Retry-After) or watch GET /jobs/{id}/exports."""
    if format == "merged" and outtype is not None:
        raise ValidationFailed("outtype applies to format=gguf only; leave it out for merged")
    kind = ExportKind(format, (outtype or DEFAULT_GGUF_TYPE) if format == "gguf" else None)
    job = jobs_service.get_job(session, user=user, job_id=job_id)
    jobs_service.servable_adapter(runtime.storage, job)
    exporter = runtime.exporter
    state = exporter.state(job.storage_key, kind)
    if state.status is ExportStatus.READY:
        return FileResponse(
            runtime.storage.export_file(job.storage_key, kind.name),
            media_type="application/zip",
            filename=f"qatune-job-{job.id}-{kind.name}.zip",
        )
    base_dir = resolve_model_dir(
        job.base_model,
        cache_dir=runtime.storage.models_dir,
        offline=runtime.settings.offline,
        configured=tuple(runtime.settings.base_models),
    )
    source = ExportSource(
        job_id=job.id, storage_key=job.storage_key, base_model=job.base_model, base_dir=base_dir
    )
    state = exporter.start(source, kind)
    return JSONResponse(
        export_out(job, state).model_dump(),
        status_code=status.HTTP_202_ACCEPTED,
        headers={"Retry-After": "2"},
    )


@router.get("/{job_id:int}/evaluation", responses=errors(404, 409))
def job_evaluation(
    job_id: ResourceId, user: CurrentUser, session: SessionDep, runtime: RuntimeDep
) -> EvaluationReport:
    """The trained model's answers beside the expected ones and the base model's: the
    validation split's questions, or without one the first training questions."""
    job = jobs_service.get_job(session, user=user, job_id=job_id)
    _, adapter_dir = jobs_service.servable_adapter(runtime.storage, job)
    report = read_evaluation(adapter_dir)
    if report is None:
        raise NotFoundError(
            f"Job {job.id} was trained before qatune kept an evaluation; ask it questions "
            "with POST /jobs/{id}/query"
        )
    return report


@router.post("/{job_id:int}/query", responses=errors(409, 503))
def query_job(
    job_id: ResourceId, body: QueryIn, user: CurrentUser, session: SessionDep, runtime: RuntimeDep
) -> QueryOut:
    job = jobs_service.get_job(session, user=user, job_id=job_id)
    adapter_key, adapter_dir = jobs_service.servable_adapter(
        runtime.storage, job, checkpoint_step=body.checkpoint_step
    )
    # The base model, if asked too, gets the same room as the tuned one.
    max_new_tokens = body.max_new_tokens or answer_budget(read_adapter_metadata(adapter_dir))
    options = {
        "max_new_tokens": max_new_tokens,
        "temperature": body.temperature,
        "top_p": body.top_p,
        "base_model": job.base_model,
    }
    # A sync route runs in FastAPI's thread pool: generation never blocks the event loop.
    result = runtime.query_service.answer(
        body.question,
        adapter_key=adapter_key,
        adapter_dir=adapter_dir,
        **options,  # type: ignore[arg-type]
    )
    base_answer = None
    if body.compare_base:
        base_answer = runtime.query_service.answer(
            body.question,
            adapter_key=None,
            adapter_dir=None,
            **options,  # type: ignore[arg-type]
        ).answer
    return QueryOut(
        job_id=job.id,
        question=body.question,
        answer=result.answer,
        base_answer=base_answer,
        base_model=job.base_model,
        device=result.device,
        seconds=round(result.seconds, 3),
    )
