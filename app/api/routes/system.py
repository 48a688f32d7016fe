from typing import Any

from fastapi import APIRouter

from app.api.deps import AdminUser, CurrentUser, RuntimeDep, SessionDep
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
