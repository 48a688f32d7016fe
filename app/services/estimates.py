"""Memory plans before training: POST /jobs/estimate, and the fit check at job creation."""

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.errors import ValidationFailed
from app.core.storage import Storage
from app.db.models import Job, User
from app.ml import hyperparameters as hp
from app.ml.device import Capabilities, select_precision
from app.ml.models import ModelUnavailable, load_tokenizer, read_recommended, resolve_model_dir
from app.ml.planner import KNOWN_SHAPES, MemoryPlan, ModelShape, plan_memory
from app.schemas.jobs import EstimateTarget, JobCreate
from app.services import jobs as jobs_service

CHARS_PER_TOKEN = 3.0  # when no tokenizer is at hand: a cautious average for mixed text


@lru_cache(maxsize=8)
def _tokenizer(model_dir: Path) -> Any:
    """Every estimate and every POST /jobs needs one: read it from disk once per model."""
    return load_tokenizer(model_dir)


def _model_facts(base_model: str, settings: Settings) -> tuple[ModelShape, Any, dict[str, Any]]:
    """The model's shape, its tokenizer if available offline, and its recommended settings."""
    try:
        model_dir = resolve_model_dir(
            base_model, cache_dir=Storage(settings.data_dir).models_dir, offline=True
        )
    except ModelUnavailable:
        shape = KNOWN_SHAPES.get(base_model)
        if shape is None:
            raise ValidationFailed(
                f"{base_model} is not cached here and its shape is unknown, so its memory "
                "cannot be estimated; the job itself will still run if the hub is reachable",
                details=[{"field": "base_model", "message": "shape unknown offline"}],
            ) from None
        return shape, None, {}
    config = json.loads((model_dir / "config.json").read_text())
    return ModelShape.from_config(config), _tokenizer(model_dir), read_recommended(model_dir)


def _lengths(pairs: list[tuple[str, str]], tokenizer: Any) -> list[int]:
    if tokenizer is None:
        return [int((len(q) + len(a)) / CHARS_PER_TOKEN) + 16 for q, a in pairs]
    from app.ml.data import encode_pair

    return [encode_pair(tokenizer, q, a).num_tokens for q, a in pairs]


def estimate(
    session: Session,
    *,
    user: User,
    storage: Storage,
    settings: Settings,
    request: JobCreate,
    device_report: dict[str, Any],
    target: EstimateTarget | None = None,
) -> dict[str, Any]:
    base_model = request.base_model or settings.default_base_model
    jobs_service.check_base_model(base_model, user=user, settings=settings)
    pairs, _ = jobs_service.training_pairs(session, user=user, storage=storage, request=request)
    plan = plan_for(base_model, pairs, request, settings, device_report, target)
    result = plan.as_dict()
    result["estimated_seconds"] = _seconds(session, base_model, plan, pairs, request, result)
    result["advice"] = None if plan.fits else plan.advice()
    return result


def plan_for(
    base_model: str,
    pairs: list[tuple[str, str]],
    request: JobCreate,
    settings: Settings,
    device_report: dict[str, Any],
    target: EstimateTarget | None = None,
) -> MemoryPlan:
    shape, tokenizer, recommended = _model_facts(base_model, settings)
    lengths = _lengths(pairs, tokenizer)
    requested = request.hyperparameters.model_dump()
    params = hp.resolve(
        requested,
        num_train_examples=len(pairs),
        longest_example_tokens=max(lengths, default=1),
        model_max_positions=32768,
        recommended=recommended,
    )
    lengths = [min(n, params.max_seq_length) for n in lengths]
    caps = Capabilities.from_dict(device_report["capabilities"])
    precision: str
    if target is None:
        device, budget = device_report["device"], None
        precision = select_precision(caps, device, params.precision).precision
    else:
        device, budget = target.device, target.memory_gb * 0.9
        # Another machine: assume its precision is the usual one for that kind of device.
        default = {"cuda": "bf16", "mps": "fp16", "cpu": "fp32"}[device]
        precision = default if params.precision == "auto" else params.precision
    return plan_memory(
        shape=shape,
        precision=precision,
        lora_r=params.lora_r,
        lengths=lengths,
        effective_batch=params.effective_batch_size,
        micro_batch_size=params.micro_batch_size,
        device=device,
        caps=caps,
        gradient_checkpointing=params.gradient_checkpointing,
        budget_gb=budget,
    )


def _seconds(
    session: Session,
    base_model: str,
    plan: MemoryPlan,
    pairs: list[tuple[str, str]],
    request: JobCreate,
    result: dict[str, Any],
) -> float | None:
    """From the speed of the last job on the same model and device, if there was one."""
    last = session.scalar(
        select(Job)
        .where(Job.base_model == base_model, Job.status == "succeeded", Job.device == plan.device)
        .order_by(Job.id.desc())
        .limit(1)
    )
    if last is None or not last.metrics.get("tokens_per_second"):
        return None
    resolved = last.hyperparameters.get("resolved", {})
    epochs = request.hyperparameters.epochs
    if epochs == "auto":
        epochs = resolved.get("epochs", 3) if last.num_examples == len(pairs) else 3
    tokens = sum(len(q) + len(a) for q, a in pairs) / CHARS_PER_TOKEN * float(epochs)
    return round(tokens / float(last.metrics["tokens_per_second"]), 1)


def refuse_if_it_cannot_fit(
    request: JobCreate,
    pairs: list[tuple[str, str]],
    settings: Settings,
    device_report: dict[str, Any],
) -> None:
    base_model = request.base_model or settings.default_base_model
    try:
        plan = plan_for(base_model, pairs, request, settings, device_report)
    except ValidationFailed:
        return  # shape unknown offline: the trainer checks again once it has the model
    if not plan.fits:
        raise ValidationFailed(
            plan.advice(), details=[{"field": "base_model", "message": "does not fit in memory"}]
        )
