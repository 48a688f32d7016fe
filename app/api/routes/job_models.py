"""/jobs/{id}/…: a job's trained model: ask it, list its checkpoints, see its evaluation,
grade it on a held-out file, download it, export it."""

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, JSONResponse

from app.api.deps import (
    CurrentUser,
    EvalsDep,
    ExporterDep,
    JobsDep,
    ResourceId,
    ServingDep,
    SessionDep,
)
from app.api.errors import error_response
from app.api.openapi import errors
from app.core.errors import ValidationFailed
from app.core.language import tr
from app.db.models import Job
from app.schemas.jobs import (
    DEFAULT_GGUF_TYPE,
    CheckpointOut,
    EvaluationReport,
    ExportOut,
    GgufType,
    JobEvalIn,
    JobEvalOut,
    QueryIn,
    QueryOut,
)
from app.services import openai_ids
from app.services.exports.exporter import (
    ExportFormat,
    ExportKind,
    ExportState,
    zipped,
)
from app.services.jobs import lifecycle as jobs_service
from app.services.jobs import trained_models
from app.services.serving.queries import Options, ServedModel

router = APIRouter(prefix="/jobs", tags=["jobs"])


@router.post("/{job_id:int}/query", response_model=QueryOut, responses=errors(408, 409, 503))
async def query_job(
    job_id: ResourceId,
    body: QueryIn,
    http: Request,
    user: CurrentUser,
    session: SessionDep,
    serving: ServingDep,
) -> Any:
    """Ask the job's model (or one of its checkpoints) a question; also its base, if asked."""

    def find() -> tuple[Job, ServedModel]:
        job = jobs_service.get_job(session, user=user, job_id=job_id)
        served = serving.job_model(job, checkpoint_step=body.checkpoint_step)
        session.commit()  # its connection goes back to the pool while the model answers
        return job, served

    job, served = await run_in_threadpool(find)
    options = Options(
        max_tokens=body.max_new_tokens, temperature=body.temperature, top_p=body.top_p
    )
    # Awaited, not waited for in a thread: many questions at once hold no thread each.
    answer = await serving.ask(served, body.question, options, http.is_disconnected)
    base_answer = (
        await serving.ask(served.bare(), body.question, options, http.is_disconnected)
        if body.compare_base and answer is not None
        else None
    )
    if answer is None or (body.compare_base and base_answer is None):
        return error_response(http.url.path, 408, "The client went away")
    return QueryOut(
        job_id=job.id,
        question=body.question,
        answer=answer.text,
        base_answer=base_answer.text if base_answer else None,
        base_model=job.base_model,
        device=serving.engines.device,
        seconds=answer.seconds,
    )


@router.post("/{job_id:int}/evals", status_code=201, responses=errors(400, 404, 409))
async def evaluate_job(
    job_id: ResourceId,
    body: JobEvalIn,
    http: Request,
    user: CurrentUser,
    session: SessionDep,
    evals: EvalsDep,
) -> JobEvalOut:
    """Grade the job's model (and its base) on a held-out file: an eval of /v1/evals whose
    runs go on in the background; `report_url` shows them side by side as they come."""

    def make() -> tuple[int, list[int]]:
        job = jobs_service.get_job(session, user=user, job_id=job_id)
        evaluation, runs = evals.evaluate_job(
            session,
            user,
            job,
            dataset_id=body.dataset_id,
            criteria=body.criteria,
            compare_base=body.compare_base,
        )
        session.commit()
        return evaluation.id, [run.id for run in runs]

    eval_number, run_numbers = await run_in_threadpool(make)
    evals.start(run_numbers)
    eval_name = openai_ids.EVAL.of(eval_number)
    run_names = [openai_ids.EVAL_RUN.of(number) for number in run_numbers]
    report = f"{http.base_url}ui/#/evals/{eval_name}/runs/" + "/vs/".join(run_names)
    return JobEvalOut(eval_id=eval_name, run_ids=run_names, report_url=report)


@router.get("/{job_id:int}/checkpoints")
def list_checkpoints(
    job_id: ResourceId, user: CurrentUser, session: SessionDep, jobs: JobsDep
) -> list[CheckpointOut]:
    """The job's saved checkpoints, oldest first; each can be asked like the final model."""
    job = jobs_service.get_job(session, user=user, job_id=job_id)
    return [
        CheckpointOut(step=c.step, train_loss=c.train_loss, created_at=c.created_at)
        for c in jobs.checkpoints(job)
    ]


@router.get("/{job_id:int}/evaluation", responses=errors(404, 409))
def job_evaluation(
    job_id: ResourceId, user: CurrentUser, session: SessionDep, jobs: JobsDep
) -> EvaluationReport:
    """The trained model's answers beside the expected ones and the base model's: the
    validation split's questions, or without one the first training questions."""
    return jobs.evaluation(jobs_service.get_job(session, user=user, job_id=job_id))


@router.get(
    "/{job_id:int}/adapter",
    response_class=Response,
    responses={
        200: {"content": {"application/zip": {}}, "description": "the adapter as a zip"},
        **errors(404, 409),
    },
)
def download_adapter(
    job_id: ResourceId, user: CurrentUser, session: SessionDep, jobs: JobsDep
) -> Response:
    """The adapter directory as a zip: load it with peft's PeftModel.from_pretrained."""
    job = jobs_service.get_job(session, user=user, job_id=job_id)
    return Response(
        zipped(jobs.adapter_dir(job), f"qatune-job-{job.id}"),
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
        message=state.message.text() if state.message else "",
        size_bytes=state.size_bytes,
        estimated_bytes=estimate,
        error=state.error.text() if state.error else None,
        download=download + (f"&outtype={kind.outtype}" if kind.outtype else ""),
    )


@router.get("/{job_id:int}/exports", responses=errors(404, 409))
def list_exports(
    job_id: ResourceId, user: CurrentUser, session: SessionDep, exporter: ExporterDep
) -> list[ExportOut]:
    """Each export of the job's model: not started, running (with progress), ready (with
    its size) or failed (with why); each with about how large it will be."""
    job = jobs_service.get_job(session, user=user, job_id=job_id)
    trained_models.require_model(job)
    return [export_out(job, o.state, o.estimated_bytes) for o in exporter.offers(job)]


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
    exporter: ExporterDep,
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
        raise ValidationFailed(tr("outtype applies to format=gguf only; leave it out for merged"))
    kind = ExportKind(format, (outtype or DEFAULT_GGUF_TYPE) if format == "gguf" else None)
    job = jobs_service.get_job(session, user=user, job_id=job_id)
    trained_models.require_model(job)
    if ready := exporter.ready_file(job, kind):
        return FileResponse(
            ready,
            media_type="application/zip",
            filename=f"qatune-job-{job.id}-{kind.name}.zip",
        )
    return JSONResponse(
        export_out(job, exporter.begin(job, kind)).model_dump(),
        status_code=status.HTTP_202_ACCEPTED,
        headers={"Retry-After": "2"},
    )
