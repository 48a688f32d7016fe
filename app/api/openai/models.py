"""/v1/models: the base models on offer and every trained model of yours, by OpenAI id."""

from fastapi import APIRouter

from app.api.deps import CurrentUser, RuntimeDep, SessionDep
from app.api.openapi import errors
from app.core.errors import BadRequest, ForbiddenError, NotFoundError
from app.db.models import Job
from app.runtime import Runtime
from app.schemas.openai.common import Deleted
from app.schemas.openai.models import Model, ModelList
from app.services import jobs as jobs_service
from app.services import openai_ids
from app.services.serving import base_model_names, find_trained

router = APIRouter(prefix="/models")


def base_models(runtime: Runtime) -> list[Model]:
    return [
        Model(id=name, created=runtime.started_at, owned_by="qatune")
        for name in base_model_names(runtime.settings)
    ]


def trained_model(job: Job, checkpoint_step: int | None = None) -> Model:
    finished = job.finished_at or job.created_at
    name = (
        openai_ids.model_id(job)
        if checkpoint_step is None
        else openai_ids.checkpoint_model_id(job, checkpoint_step)
    )
    return Model(
        id=name,
        created=int(finished.timestamp()),
        owned_by=job.owner.username,
        parent=job.base_model if checkpoint_step is None else openai_ids.model_id(job),
    )


@router.get("")
def list_models(user: CurrentUser, session: SessionDep, runtime: RuntimeDep) -> ModelList:
    trained = [trained_model(job) for job in jobs_service.succeeded_jobs(session, user=user)]
    return ModelList(data=[*base_models(runtime), *trained])


@router.get("/{model:path}")
def retrieve_model(
    model: str, user: CurrentUser, session: SessionDep, runtime: RuntimeDep
) -> Model:
    for base in base_models(runtime):
        if base.id == model:
            return base
    found = find_trained(session, user, model)
    if found is not None:
        job, step = found
        if job.status == "succeeded" and job.model_deleted_at is None and step is None:
            return trained_model(job)
        if step is not None and any(
            c.step == step for c in jobs_service.checkpoints(runtime.storage, job)
        ):
            return trained_model(job, step)
    raise NotFoundError(f"The model {model[:200]!r} does not exist or is not yours")


@router.delete("/{model:path}", responses=errors(400, 403))
def delete_model(
    model: str, user: CurrentUser, session: SessionDep, runtime: RuntimeDep
) -> Deleted:
    """Delete one of your fine-tuned models: its adapter and checkpoints go, its job stays."""
    if any(base.id == model for base in base_models(runtime)):
        raise ForbiddenError(f"{model!r} is a base model; only fine-tuned models can be deleted")
    found = find_trained(session, user, model)
    if found is None:
        raise NotFoundError(f"The model {model[:200]!r} does not exist or is not yours")
    job, step = found
    if step is not None:
        raise BadRequest(
            "That is a checkpoint of a model; delete the model itself "
            f"({openai_ids.model_id(job)}), which removes its checkpoints too",
            param="model",
        )
    jobs_service.delete_model(session, user=user, storage=runtime.storage, job_id=job.id)
    runtime.query_service.forget_adapter(job.storage_key)
    return Deleted(id=model, object="model")
