"""The base models a job can start from: those on offer (built-in, configured), those the
hub's cache holds here, and a name typed in (a hub id, or for admins a server directory),
checked before a job is made of it: GET /models/check, and POST /jobs for a hub id that
an offline service could never fetch.
"""

from app.core.config import Settings
from app.core.errors import NotPossibleHere
from app.core.language import tr
from app.core.names import HUB_ID
from app.core.storage import Storage
from app.db.models import User
from app.ml.builtin import is_builtin
from app.ml.gguf_bases import GgufNotReadYet
from app.ml.models import (
    ModelUnavailable,
    download_advice,
    hub_answer,
    is_local_path,
    read_model_facts,
    resolve_model_dir,
)
from app.ml.ollama_store import is_ollama
from app.ml.packaged import is_packaged
from app.schemas.system import ModelCheck, ModelSource
from app.services.jobs.estimates import tokenizer_of
from app.services.jobs.training_data import check_base_model

HUB_CHECK_TIMEOUT_S = 3.0  # a reachable hub answers well within this


def source_of(name: str, settings: Settings) -> ModelSource:
    if is_builtin(name):
        return "builtin"
    if is_packaged(name):
        return "packaged"
    if name in settings.base_models:
        return "configured"
    if is_ollama(name):
        return "ollama"
    return "local" if is_local_path(name) else "hub"


def check_model(
    name: str, *, user: User, settings: Settings, storage: Storage, precision: str
) -> ModelCheck:
    """Whether a job could start from `name` here, and if not, what to do; who may name
    what is checked first (a server path, an Ollama model: admins only). A GGUF is read
    into the model cache the first time (said in the log)."""
    check_base_model(name, user=user, settings=settings, field="name")
    source = source_of(name, settings)
    try:
        model_dir = resolve_model_dir(
            name,
            cache_dir=storage.models_dir,
            offline=True,
            configured=settings.base_models,
            precision=precision,
            read_gguf=False,  # a check answers at once; the first job reads it
        )
    except GgufNotReadYet as exc:
        return ModelCheck(name=name, source=source, usable=True, cached=False, message=str(exc))
    except ModelUnavailable as exc:
        if source != "hub":
            return ModelCheck(
                name=name, source=source, usable=False, cached=False, message=str(exc)
            )
        return _not_cached(name, settings)
    try:
        shape = read_model_facts(model_dir).shape
        tokenizer_of(model_dir)  # it must have a chat template (read once per model)
    except (ModelUnavailable, OSError, ValueError, KeyError) as exc:
        return ModelCheck(
            name=name,
            source=source,
            usable=False,
            cached=True,
            message=tr("{name}: {problem}", name=name, problem=exc),
        )
    return ModelCheck(
        name=name,
        source="cached" if source == "hub" else source,
        usable=True,
        cached=True,
        message=tr(
            "ready here: {parameters} parameters, reads {tokens:,} tokens",
            parameters=_count(shape.num_params),
            tokens=shape.max_positions,
        ),
    )


def _count(parameters: int) -> str:
    return f"{parameters / 1e9:.1f}B" if parameters >= 1e9 else f"{parameters / 1e6:.1f}M"


def _not_cached(name: str, settings: Settings) -> ModelCheck:
    """A hub id not downloaded here: usable only if this service may and can fetch it."""
    why = tr("QATUNE_OFFLINE is set") if settings.offline else None
    why = why or hub_answer(name, timeout_s=HUB_CHECK_TIMEOUT_S)
    if why:
        message = tr(
            "{name} is not cached here and {why}: {advice}",
            name=name,
            why=why,
            advice=download_advice(name),
        )
        return ModelCheck(name=name, source="hub", usable=False, cached=False, message=message)
    return ModelCheck(
        name=name,
        source="hub",
        usable=True,
        cached=False,
        message=tr("{name} is on the hub: it is downloaded when its first job starts", name=name),
    )


def refuse_if_unreachable(name: str, *, settings: Settings, storage: Storage) -> None:
    """An offline service cannot fetch a hub model it does not hold: said at creation, not
    by a job that fails when it starts."""
    if not settings.offline or not HUB_ID.match(name) or source_of(name, settings) != "hub":
        return
    try:
        resolve_model_dir(name, cache_dir=storage.models_dir, offline=True)
    except ModelUnavailable as exc:
        raise NotPossibleHere(
            str(exc), details=[{"field": "base_model", "message": tr("not cached here")}]
        ) from exc
