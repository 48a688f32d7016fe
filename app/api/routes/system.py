"""/health, /ready, /metrics and /system/*: whether the service is up, and what it runs on."""

from typing import Annotated

from fastapi import APIRouter, Query, Response
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import text

from app.api.deps import AdminUser, CurrentUser, Operator, RuntimeDep, ServingDep, SessionDep
from app.api.openapi import errors
from app.core.disk import DiskLevel
from app.schemas.system import (
    AdapterMetrics,
    DeviceReport,
    EngineReport,
    Health,
    ModelCheck,
    ModelsOut,
    OfferedModel,
    Readiness,
    TrainedModel,
)
from app.services import openai_ids
from app.services.jobs import base_models

router = APIRouter(tags=["system"])
health_router = APIRouter(tags=["system"])


@health_router.get("/health")
async def health(runtime: RuntimeDep) -> Health:  # on the loop: a busy thread pool never delays it
    worker = runtime.worker
    return Health(
        worker="embedded" if worker else "external",
        training_job=worker.current_job if worker else None,
    )


@health_router.get(
    "/ready",
    dependencies=[Operator],
    responses={
        503: {
            "model": Readiness,
            "description": "the database or the executor is not reachable, or the disk is full",
        },
        **errors(401, 403),
    },
)
def ready(runtime: RuntimeDep, session: SessionDep, response: Response) -> Readiness:
    """Readiness: the database answers, the data directory's disk has room, and the
    embedded worker (if this process runs one) is alive with its executor reachable (the
    Ray cluster, with at least one slot). 503 with what is wrong otherwise."""
    checks: dict[str, str] = {}
    try:
        session.execute(text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:  # noqa: BLE001  (any failure is "not ready", said in the body)
        checks["database"] = f"unreachable: {type(exc).__name__}"
    if runtime.settings.embedded_worker:
        checks["worker"] = "ok" if runtime.worker and runtime.worker.alive else "not running"
        if runtime.worker:
            checks["executor"] = runtime.worker.executor_status()
    else:
        checks["worker"] = "external"  # its jobs' heartbeats are in GET /metrics
    if runtime.settings.serving_backend == "vllm":
        down = [  # a base model none of whose servers answers
            f"{stats.base_model}: " + "; ".join(replica.problem for replica in stats.replicas)
            for stats in runtime.serving_stats()
            if stats.replicas and not any(replica.up for replica in stats.replicas)
        ]
        checks["serving"] = " | ".join(down) if down else "ok"
    disk = runtime.disk()
    healthy = (
        all(value in ("ok", "external") for value in checks.values())
        and disk.level != DiskLevel.FULL
    )
    if not healthy:
        response.status_code = 503
    return Readiness(status="ready" if healthy else "not ready", disk=disk.describe(), **checks)


@health_router.get(
    "/metrics",
    dependencies=[Operator],
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}, **errors(401, 403)},
)
def metrics(runtime: RuntimeDep) -> Response:
    """Prometheus' text format: jobs, queue, training speed, heartbeats, request latency,
    inference queues and tokens (README: Operations)."""
    return Response(runtime.metrics.render(), media_type=CONTENT_TYPE_LATEST)


@router.get("/system/device")
def device(_: CurrentUser, runtime: RuntimeDep) -> DeviceReport:
    """The device, precision and memory budget that training and serving use here, and why."""
    return DeviceReport.of(runtime.device_plan)


@router.get("/system/serving")
def serving(_: AdminUser, runtime: RuntimeDep) -> list[EngineReport]:
    """Each loaded base model's engine: requests running and waiting, adapters loaded."""
    return [EngineReport.of(stats) for stats in runtime.query_service.stats()]


@router.get("/models/check", responses=errors(403, 422))
def check_model(
    user: CurrentUser,
    runtime: RuntimeDep,
    name: Annotated[str, Query(min_length=1, max_length=300, description="a base model")],
) -> ModelCheck:
    """Whether a job can start from this base model here, and if not, what to do: the
    built-in or a configured model, a hub id (cached here, or reachable), or (admins) a
    model directory on the server. Asks the hub (a few seconds at most) only for a hub id
    that is not cached, unless QATUNE_OFFLINE is set."""
    return base_models.check_model(
        name.strip(),
        user=user,
        settings=runtime.settings,
        storage=runtime.storage,
        precision=runtime.device_plan.precision,
    )


@router.get("/models")
def models(user: CurrentUser, session: SessionDep, serving: ServingDep) -> ModelsOut:
    """The base models on offer and your fine-tuned models (the OpenAI API: GET /v1/models)."""
    offered = [
        OfferedModel(name=offer.name, kind=offer.kind, description=offer.description)
        for offer in serving.offers()
    ]
    adapters = [
        TrainedModel(
            id=openai_ids.model_id(job),
            job_id=job.id,
            name=job.name,
            base_model=job.base_model,
            owner=job.owner.username,
            finished_at=job.finished_at,
            metrics=AdapterMetrics(
                train_loss=job.metrics.train_loss, eval_exact_match=job.metrics.eval_exact_match
            ),
        )
        for job in serving.trained_models(session, user)
    ]
    return ModelsOut(base_models=offered, adapters=adapters)
