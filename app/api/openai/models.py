"""/v1/models: the base models on offer and every trained model of yours, by OpenAI id."""

from fastapi import APIRouter

from app.api.deps import CurrentUser, RuntimeDep, ServingDep, SessionDep
from app.api.openapi import errors
from app.db.models import Job
from app.schemas.openai.common import CursorPage, Deleted
from app.schemas.openai.models import Model
from app.services import openai_ids
from app.services.serving.queries import ServedModel

router = APIRouter(prefix="/models")


def base_model(name: str, runtime_started_at: int) -> Model:
    return Model(id=name, created=runtime_started_at, owned_by="qatune")


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


def as_model(served: ServedModel, runtime_started_at: int) -> Model:
    if served.job is None:
        return base_model(served.name, runtime_started_at)
    return trained_model(served.job, served.checkpoint_step)


@router.get("")
def list_models(
    user: CurrentUser, session: SessionDep, serving: ServingDep, runtime: RuntimeDep
) -> CursorPage[Model]:
    bases = [base_model(name, runtime.started_at) for name in serving.base_models()]
    trained = [trained_model(job) for job in serving.trained_models(session, user)]
    return CursorPage.of([*bases, *trained], has_more=False)


@router.get("/{model:path}")
def retrieve_model(
    model: str, user: CurrentUser, session: SessionDep, serving: ServingDep, runtime: RuntimeDep
) -> Model:
    return as_model(serving.resolve(session, user, model), runtime.started_at)


@router.delete("/{model:path}", responses=errors(400, 403))
def delete_model(
    model: str, user: CurrentUser, session: SessionDep, serving: ServingDep
) -> Deleted:
    """Delete one of your fine-tuned models: its adapter, checkpoints and exports go, its
    job stays."""
    serving.delete_model(session, user, model)
    return Deleted(id=model, object="model")
