"""What a job request trains: its base model, checked for the user, and its pairs.

Shared by creating a job and estimating one, so an estimate describes the job it would be.
"""

from pathlib import Path

from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.errors import DataMismatch, ForbiddenError, ValidationFailed
from app.core.language import tr
from app.core.names import HUB_ID, OLLAMA_NAME
from app.core.storage import Storage
from app.db.models import User
from app.graders.spec import template_strings
from app.graders.templates import MissingVariable, value_of, variables
from app.ml.builtin import is_builtin
from app.ml.packaged import is_packaged
from app.ml.pairs import QAPair
from app.schemas.jobs import JobCreate, Method
from app.services.datasets import files as datasets_service
from app.services.datasets.qa_parsing import validate_pairs


def base_model_of(request: JobCreate, settings: Settings) -> str:
    return request.base_model or settings.default_base_model


def check_base_model(
    name: str, *, user: User, settings: Settings, field: str = "base_model"
) -> None:
    """Built-in and packaged models, hub ids and configured models for everyone; absolute
    paths on the server (a model directory or a GGUF file) and Ollama's models for admins.
    The message never says whether a path exists; `field` is where the request named it."""
    if is_builtin(name) or is_packaged(name) or name in settings.base_models:
        return
    if HUB_ID.match(name):
        return
    server_file = Path(name).is_absolute() or OLLAMA_NAME.match(name)
    if server_file and user.is_admin:
        return
    if server_file:
        raise ForbiddenError(
            tr(
                "Only admins may train on a file of the server (a directory, a GGUF file, an "
                "Ollama model); ask one to add it to QATUNE_BASE_MODELS"
            )
        )
    raise ValidationFailed(
        tr(
            "{field} {name!r} is not a model qatune knows: use smollm2-135m-instruct or "
            "builtin:tiny, a hub id like Qwen/Qwen2.5-0.5B-Instruct, or a configured model "
            "(GET /models lists them)",
            field=field,
            name=name,
        ),
        details=[{"field": field, "message": tr("unknown base model")}],
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
            tr("Give a validation file or a validation_split, not both"),
            details=[{"field": "hyperparameters.validation_split", "message": tr("not both")}],
        )
    dataset = datasets_service.get_dataset(
        session, user=user, dataset_id=request.validation_dataset_id
    )
    return datasets_service.read_pairs(storage, dataset)


RL_ONLY = ("group_size", "eval_interval", "eval_samples")


def training_method(request: JobCreate, pairs: list[QAPair]) -> Method:
    """What the job tunes with: `method` as asked, else reinforcement with a grader, else
    what the data holds: preference pairs (a non-preferred answer each) tune with DPO,
    plain pairs supervised."""
    preference = [pair.rejected is not None for pair in pairs]
    method = request.method or (
        "reinforcement" if request.grader else "dpo" if all(preference) else "supervised"
    )
    asked = request.hyperparameters
    if method == "reinforcement":
        _check_reinforcement(request, preference)
        _check_the_grader_reads_the_data(request, pairs)
        return method
    prompts = [pair.prompt_only for pair in pairs]
    if any(prompts):
        first = prompts.index(True) + 1
        raise DataMismatch(
            tr(
                "Example {first} is a prompt with no answer (OpenAI's reinforcement record): "
                "{method} learns answers; give method reinforcement with a grader",
                first=first,
                method=method,
            ),
            details=[
                {"item": first, "field": "method", "message": tr("a prompt needs reinforcement")}
            ],
        )
    if request.grader is not None:
        raise DataMismatch(
            tr(
                "A grader scores sampled answers in reinforcement jobs: leave it out for "
                "{method}, or give method reinforcement",
                method=method,
            ),
            details=[{"field": "grader", "message": tr("reinforcement only")}],
        )
    given = [name for name in RL_ONLY if getattr(asked, name) != "auto"]
    if given:
        raise DataMismatch(
            tr(
                "{given} is reinforcement's: leave it out for {method}",
                given=given[0],
                method=method,
            ),
            details=[{"field": f"hyperparameters.{given[0]}", "message": tr("reinforcement only")}],
        )
    if method == "dpo" and not all(preference):
        first = preference.index(False) + 1
        raise DataMismatch(
            tr(
                "method dpo needs preference pairs: example {first} has no non-preferred answer "
                '(OpenAI\'s preference records: "input", "preferred_output", '
                '"non_preferred_output")',
                first=first,
            ),
            details=[{"item": first, "field": "method", "message": tr("no non-preferred answer")}],
        )
    if method == "supervised" and any(preference):
        raise DataMismatch(
            tr(
                "These are preference pairs: tune them with method dpo, or upload plain "
                "question-answer pairs for supervised"
            ),
            details=[{"field": "method", "message": tr("preference pairs need method dpo")}],
        )
    if method == "supervised" and asked.beta != "auto":
        raise DataMismatch(
            tr("beta is DPO's and reinforcement's: leave it out for supervised"),
            details=[{"field": "hyperparameters.beta", "message": tr("not for supervised")}],
        )
    if method == "dpo" and asked.processes not in ("auto", 1):
        raise DataMismatch(
            tr("DPO trains in one process: leave processes out"),
            details=[{"field": "hyperparameters.processes", "message": tr("1 for DPO")}],
        )
    return method


def _check_the_grader_reads_the_data(request: JobCreate, pairs: list[QAPair]) -> None:
    """Every item field the grader's templates read is in every example: a grader that
    cannot score the data is refused now, not found out by a job that learns nothing."""
    assert request.grader is not None
    sample = {"output_text": "", "output_json": {}, "output_tools": []}
    for position, pair in enumerate(pairs, start=1):
        namespaces = {"item": pair.grader_item, "sample": sample}
        for template in template_strings(request.grader):
            for variable in variables(template):
                if variable.namespace != "item":
                    continue
                try:
                    value_of(variable.text, namespaces)
                except MissingVariable as exc:
                    raise DataMismatch(
                        tr(
                            "The grader reads {{{{ {variable} }}}}, which example {position} "
                            "does not have ({why}): add the field to every record, or change "
                            "the grader",
                            variable=variable.text,
                            position=position,
                            why=str(exc),
                        ),
                        details=[{"item": position, "field": "grader", "message": str(exc)}],
                    ) from exc


def _check_reinforcement(request: JobCreate, preference: list[bool]) -> None:
    if request.grader is None:
        raise DataMismatch(
            tr(
                "method reinforcement needs a grader to score the sampled answers: give one (e.g. "
                '{"type": "string_check", "name": "exact", "input": "{{sample.output_text}}", '
                '"reference": "{{item.answer}}", "operation": "eq"})'
            ),
            details=[{"field": "grader", "message": tr("required for reinforcement")}],
        )
    if any(preference):
        raise DataMismatch(
            tr(
                "Preference pairs tune with method dpo: reinforcement samples its own answers "
                "from prompts (question-answer pairs, or OpenAI's reinforcement records)"
            ),
            details=[{"field": "method", "message": tr("preference pairs need method dpo")}],
        )
    if request.hyperparameters.processes not in ("auto", 1):
        raise DataMismatch(
            tr("Reinforcement trains in one process: leave processes out"),
            details=[{"field": "hyperparameters.processes", "message": tr("1 for reinforcement")}],
        )
