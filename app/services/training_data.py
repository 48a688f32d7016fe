"""What a job request trains: its base model, checked for the user, and its pairs.

Shared by creating a job and estimating one, so an estimate describes the job it would be.
"""

from pathlib import Path

from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.errors import ForbiddenError, ValidationFailed
from app.core.names import HUB_ID
from app.core.storage import Storage
from app.db.models import User
from app.ml.builtin import is_builtin
from app.ml.pairs import QAPair
from app.schemas.jobs import JobCreate
from app.services import datasets as datasets_service
from app.services.qa_parsing import validate_pairs


def base_model_of(request: JobCreate, settings: Settings) -> str:
    return request.base_model or settings.default_base_model


def check_base_model(name: str, *, user: User, settings: Settings) -> None:
    """Built-in models, hub ids and configured models for everyone; absolute paths on the
    server for admins. The message never says whether a path exists."""
    if is_builtin(name) or name in settings.base_models or HUB_ID.match(name):
        return
    if Path(name).is_absolute() and user.is_admin:
        return
    if Path(name).is_absolute():
        raise ForbiddenError(
            "Only admins may train on a server path; ask one to add it to QATUNE_BASE_MODELS"
        )
    raise ValidationFailed(
        f"base_model {name!r} is not builtin:tiny, a hub id like Qwen/Qwen2.5-0.5B-Instruct, "
        "or a configured model (GET /models lists them)",
        details=[{"field": "base_model", "message": "unknown base model"}],
    )


def training_pairs(
    session: Session, *, user: User, storage: Storage, request: JobCreate
) -> tuple[list[QAPair], int | None]:
    """The pairs to train on, and the dataset they come from (None: given inline)."""
    if request.dataset_id is not None:
        dataset = datasets_service.get_dataset(session, user=user, dataset_id=request.dataset_id)
        return datasets_service.read_pairs(storage, dataset), dataset.id
    return validate_pairs(request.qa_pairs or []), None


def validation_pairs(
    session: Session, *, user: User, storage: Storage, request: JobCreate
) -> list[QAPair]:
    """The validation file's pairs, if the request names one (then it gives no split)."""
    if request.validation_dataset_id is None:
        return []
    if request.hyperparameters.validation_split not in ("auto", 0):
        raise ValidationFailed(
            "Give a validation file or a validation_split, not both",
            details=[{"field": "hyperparameters.validation_split", "message": "not both"}],
        )
    dataset = datasets_service.get_dataset(
        session, user=user, dataset_id=request.validation_dataset_id
    )
    return datasets_service.read_pairs(storage, dataset)
