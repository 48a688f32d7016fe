"""Which model a name serves: a base on offer, or a user's fine-tuned model or checkpoint.

One reading of model names for /v1/models, the completions routes and the playground, so
a name that lists is a name that answers, and another user's model is not found.
"""

from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.errors import NotFoundError
from app.core.storage import Storage
from app.db.models import Job, JobStatus, User
from app.ml.builtin import BUILTIN_TINY
from app.ml.serving.requests import AdapterRef
from app.ml.training.adapter_files import read_adapter_metadata
from app.services import jobs as jobs_service
from app.services import openai_ids


@dataclass(frozen=True)
class ServedModel:
    name: str
    base_model: str
    adapter: AdapterRef | None  # None: the base model itself
    system_prompt: str | None  # the one the adapter was trained with, if any


def base_model_names(settings: Settings) -> list[str]:
    return list(dict.fromkeys([BUILTIN_TINY, settings.default_base_model, *settings.base_models]))


def find_trained(session: Session, user: User, name: str) -> tuple[Job, int | None] | None:
    """The job (and checkpoint step) an ft: name is, if it is exactly one of the user's."""
    ref = openai_ids.parse_model_id(name)
    if ref is None:
        return None
    try:
        job = jobs_service.get_job(session, user=user, job_id=ref.job_id)
    except NotFoundError:
        return None
    return (job, ref.checkpoint_step) if ref.matches(job, name) else None


def served_model(
    session: Session, user: User, settings: Settings, storage: Storage, name: str
) -> ServedModel:
    """What `name` answers with; NotFoundError if it is not a model this user can ask."""
    if name in base_model_names(settings) or any(
        job.base_model == name for job in jobs_service.succeeded_jobs(session, user=user)
    ):  # a base on offer, or the base of a model of theirs (the playground compares them)
        return ServedModel(name, name, None, None)
    found = find_trained(session, user, name)
    missing = NotFoundError(
        f"The model {name[:200]!r} does not exist or is not yours; GET /v1/models lists "
        "the ones you can use"
    )
    if found is None:
        raise missing
    job, step = found
    if step is None and (job.status != JobStatus.SUCCEEDED or job.model_deleted_at is not None):
        raise missing
    key, directory = jobs_service.servable_adapter(storage, job, checkpoint_step=step)
    system_prompt = read_adapter_metadata(directory).system_prompt  # AdapterInvalid: 409
    return ServedModel(name, job.base_model, AdapterRef(key, directory), system_prompt)
