from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import text

from app.api.deps import AdminUser, CurrentUser, Operator, RuntimeDep, SessionDep
from app.api.openapi import errors
from app.ml.builtin import BUILTIN_TINY
from app.schemas.system import DeviceReport, EngineReport
from app.services import jobs as jobs_service
from app.services import openai_ids

router = APIRouter(tags=["system"])
health_router = APIRouter(tags=["system"])


@health_router.get("/health")
def health(runtime: RuntimeDep) -> dict[str, Any]:
    worker = runtime.worker
    return {
        "status": "ok",
        "worker": "embedded" if worker else "external",
        "training_job": worker.current_job if worker else None,
    }


@health_router.get(
    "/ready",
    dependencies=[Operator],
    responses={
        503: {"description": "the database or the executor is not reachable"},
        **errors(401, 403),
    },
)
def ready(runtime: RuntimeDep, session: SessionDep) -> JSONResponse:
    """Readiness: the database answers, and the embedded worker (if this process runs
    one) is alive with its executor reachable (the Ray cluster, with at least one slot).
    503 with what is wrong otherwise."""
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
    healthy = all(value in ("ok", "external") for value in checks.values())
    body = {"status": "ready" if healthy else "not ready", **checks}
    return JSONResponse(body, status_code=200 if healthy else 503)


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


@router.get("/models")
def models(user: CurrentUser, session: SessionDep, runtime: RuntimeDep) -> dict[str, Any]:
    settings = runtime.settings
    offered = [
        {
            "name": BUILTIN_TINY,
            "kind": "builtin",
            "description": "Demo model made locally (3.2M parameters, byte-level). It knows "
            "nothing until trained; use it to try qatune, not for real answers.",
        }
    ]
    for name in dict.fromkeys([settings.default_base_model, *settings.base_models]):
        if name != BUILTIN_TINY:
            offered.append({"name": name, "kind": "configured", "description": ""})
    succeeded = jobs_service.succeeded_jobs(session, user=user)
    adapters = [
        {
            "id": openai_ids.model_id(job),
            "job_id": job.id,
            "name": job.name,
            "base_model": job.base_model,
            "owner": job.owner.username,
            "finished_at": job.finished_at,
            "metrics": {k: job.metrics.get(k) for k in ("train_loss", "eval_exact_match")},
        }
        for job in succeeded
    ]
    return {"base_models": offered, "adapters": adapters}
