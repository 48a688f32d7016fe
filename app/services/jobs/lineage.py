"""Fine-tuning a fine-tuned model: a job that starts from another job's adapter.

The new job trains the same LoRA adapter further (its rank, alpha, dropout and layers are
the starting model's), on its own copy of the starting weights: deleting the starting
model later changes nothing for it, a resumed run included. Its result is a whole adapter
on the same base, so serving and exports treat it as any other; the lineage is recorded
on the job, in the adapter's metadata and in its model card.
"""

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.errors import NotFoundError, ValidationFailed
from app.core.language import tr
from app.core.storage import Storage
from app.db.models import Job, User
from app.ml.hyperparameters import LORA_FIELDS, HyperparameterRequest
from app.ml.training.adapter_metadata import REQUIRED_FILES
from app.schemas.jobs import JobCreate
from app.services import openai_ids
from app.services.jobs.trained_models import servable_adapter

R = TypeVar("R", bound=JobCreate)


@dataclass(frozen=True)
class StartingPoint:
    job: Job
    checkpoint_step: int | None
    adapter_dir: Path
    model: str  # its ft: name, as the user would ask it

    @property
    def base_model(self) -> str:
        return self.job.base_model


def starting_point(
    session: Session, *, user: User, storage: Storage, request: JobCreate
) -> StartingPoint | None:
    """The model the request continues from (`base_job_id`), or None: a new adapter.
    Another user's job is a 404, as for chat; one with no model yet says why."""
    if request.base_job_id is None:
        return None
    job = session.scalar(
        select(Job).where(Job.id == request.base_job_id, Job.owner_id == user.id)
    )  # an admin sees every job, but trains only from their own models
    if job is None:
        raise NotFoundError(
            tr(
                "Job {base_job_id} not found; GET /jobs lists yours",
                base_job_id=request.base_job_id,
            )
        )
    step = request.base_checkpoint_step
    _, directory = servable_adapter(storage, job, checkpoint_step=step)
    model = openai_ids.model_id(job) if step is None else openai_ids.checkpoint_model_id(job, step)
    if request.base_model is not None and request.base_model != job.base_model:
        raise ValidationFailed(
            tr(
                "{model} was trained on {base_model}; leave base_model out or give that one",
                model=model,
                base_model=job.base_model,
            ),
            details=[{"field": "base_model", "message": tr("not the starting model's base")}],
        )
    return StartingPoint(job, step, directory, model)


def continued_request(
    session: Session, *, user: User, storage: Storage, request: R
) -> tuple[R, StartingPoint | None]:
    """The request as it trains: from its starting model's base, with its LoRA shape."""
    start = starting_point(session, user=user, storage=storage, request=request)
    if start is None:
        return request, None
    hyperparameters = continued_hyperparameters(request.hyperparameters, start)
    update = {"base_model": start.base_model, "hyperparameters": hyperparameters}
    return request.model_copy(update=update), start


def continued_hyperparameters(
    asked: HyperparameterRequest, start: StartingPoint
) -> HyperparameterRequest:
    """The request with the starting adapter's LoRA shape; a different one asked is a 422."""
    resolved = start.job.resolved_hyperparameters
    if resolved is None:  # succeeded jobs always have it; an old database might not
        return asked
    own = {name: getattr(resolved, name) for name in LORA_FIELDS}
    clashes = [name for name in LORA_FIELDS if getattr(asked, name) not in ("auto", own[name])]
    if clashes:
        raise ValidationFailed(
            tr(
                "{start_model} is trained further with its own LoRA shape: leave {fields} out (or "
                "give {values})",
                start_model=start.model,
                fields=", ".join(clashes),
                values=", ".join(f"{n}={own[n]}" for n in clashes),
            ),
            details=[
                {
                    "field": f"hyperparameters.{name}",
                    "message": tr("must be {value}", value=own[name]),
                }
                for name in clashes
            ],
        )
    return asked.model_copy(update=own)


def copy_starting_adapter(start: StartingPoint, target: Path) -> None:
    """The job's own copy of the weights it starts from (the adapter files only)."""
    target.mkdir(parents=True)
    for name in REQUIRED_FILES:
        source = start.adapter_dir / name
        if source.is_file():
            shutil.copy2(source, target / name)
