"""Plans before training: POST /jobs/estimate, and the fit check at job creation.

Both call the trainer's own `plan_training` with the process's device plan, so an
estimate and the job it describes resolve the same hyperparameters and the same memory
plan (the trainer's resolution runs again only on a model that was not cached here).
"""

from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.errors import BadRequest, NotFoundError, NotPossibleHere, ValidationFailed
from app.core.language import said, tr
from app.core.storage import Storage
from app.db.models import Job, User
from app.jobs.status import JobStatus
from app.ml.device import DevicePlan, Precision, PrecisionDecision
from app.ml.hyperparameters import (
    HyperparameterRequest,
    ResolvedHyperparameters,
)
from app.ml.models import (
    ModelFacts,
    ModelUnavailable,
    Recommended,
    adaptable_layers,
    load_tokenizer,
    read_model_facts,
    resolve_model_dir,
)
from app.ml.pairs import QAPair
from app.ml.planner import MemoryPlan, TrainingPlan, plan_training
from app.ml.quantization import QUANTIZED, QuantizationSupport, QuantizationUnavailable
from app.ml.shapes import KNOWN_SHAPES, ModelShape
from app.ml.speed import cpu_gflops, rough_tokens_per_second
from app.schemas.jobs import EstimateTarget, JobCreate
from app.services.jobs.example_checks import check_context, check_tools, data_facts_of
from app.services.jobs.lineage import continued_request
from app.services.jobs.training_data import (
    base_model_of,
    check_base_model,
    training_method,
    training_pairs,
)

# An estimate for another machine assumes what that kind of device usually trains in.
USUAL_PRECISION: dict[str, Precision] = {"cuda": "bf16", "mps": "fp16", "cpu": "fp32"}


class ShapeUnknown(NotFoundError):
    """The model is not here and not among the known shapes: nothing to plan with."""


@lru_cache(maxsize=8)
def tokenizer_of(model_dir: Path) -> Any:
    """Every estimate, model check and POST /jobs needs one: read from disk once per model."""
    return load_tokenizer(model_dir)


@dataclass(frozen=True)
class _Model:
    facts: ModelFacts
    tokenizer: Any  # None when the model is not here: lengths are then estimated
    directory: Path | None = None  # None when the model is not here


def _model(base_model: str, settings: Settings, precision: str) -> _Model:
    try:
        model_dir = resolve_model_dir(
            base_model,
            cache_dir=Storage(settings.data_dir).models_dir,
            offline=True,
            configured=settings.base_models,
            precision=precision,
        )
    except ModelUnavailable:
        shape = KNOWN_SHAPES.get(base_model)
        if shape is None:
            raise ShapeUnknown(
                tr(
                    "{base_model} is not cached here and its shape is unknown, so its memory "
                    "cannot be estimated; the job itself will still run if the hub is reachable",
                    base_model=base_model,
                ),
                details=[{"field": "base_model", "message": tr("shape unknown offline")}],
            ) from None
        return _Model(ModelFacts(shape, Recommended()), None)
    return _Model(read_model_facts(model_dir), tokenizer_of(model_dir), model_dir)


def warm_up_model(base_model: str, settings: Settings, precision: str) -> None:
    """Make (the built-in model, a packaged one) or find the model and load its tokenizer,
    ahead of time."""
    _model(base_model, settings, precision)


@dataclass(frozen=True)
class _Planned:
    plan: TrainingPlan
    shape: ModelShape
    epoch_tokens: int  # prompts and answers, in the model's tokens (or about)


def plan_for(
    base_model: str,
    pairs: list[QAPair],
    request: JobCreate,
    settings: Settings,
    device_plan: DevicePlan,
    target: EstimateTarget | None = None,
) -> _Planned:
    """The job's plan here, or on `target` (another machine: its usual precision)."""
    requested = request.hyperparameters
    support = _quantization_support(requested, device_plan, target)
    model = _model(base_model, settings, device_plan.precision)
    devices = 1  # another machine's devices are not known
    if target is None:
        device, budget = device_plan.device, device_plan.memory_budget_gb
        budget_reason = device_plan.budget_reason.english()
        devices = device_plan.devices  # as the trainer resolves: processes per GPU here
        try:
            precision = device_plan.precision_for(requested.precision)
        except ValueError as exc:
            raise NotPossibleHere(
                tr("precision: {exc}", exc=exc),
                details=[{"field": "hyperparameters.precision", "message": str(exc)}],
            ) from exc
    else:
        device, budget = target.device, target.memory_gb * 0.9
        budget_reason = f"90% of the {target.memory_gb:g} GB given"
        usual = USUAL_PRECISION[device]
        name = usual if requested.precision == "auto" else requested.precision
        precision = PrecisionDecision(
            name,
            name == "fp16",
            said("{precision} on a {device} machine", precision=name, device=device),
        )
    if model.tokenizer is not None:
        check_tools(base_model, pairs, model.tokenizer)
    if model.directory is not None and isinstance(requested.lora_target_modules, list):
        _check_lora_targets(base_model, model.directory, requested.lora_target_modules)
    # A grader means reinforcement: its defaults (epochs, group size) are resolved
    data = replace(
        data_facts_of(base_model, pairs, model.tokenizer), reinforcement=request.grader is not None
    )
    if model.tokenizer is not None and not data.preference:  # (DPO: both answers summed)
        check_context(base_model, pairs, data, model.facts.shape.max_positions)
    plan = plan_training(
        requested,
        data=data,
        shape=model.facts.shape,
        recommended=model.facts.recommended,
        device=device,
        precision=precision,
        budget_gb=budget,
        budget_reason=budget_reason,
        devices=devices,
        quantizations=support.kinds,
    )
    return _Planned(plan, model.facts.shape, sum(data.lengths))


def _check_lora_targets(base_model: str, model_dir: Path, targets: list[str]) -> None:
    """Each layer named must be one of the base's (as peft matches it: the name, or the
    end of one): refused here, not after the job waited its turn and loaded the model, and
    a misspelt one among right ones is not left out in silence."""
    layers = adaptable_layers(model_dir)
    if layers is None:
        return
    missing = [t for t in targets if not any(n == t or n.endswith(f".{t}") for n in layers)]
    if not missing:
        return
    names = ", ".join(sorted({name.rsplit(".", 1)[-1] for name in layers}))
    raise ValidationFailed(
        tr(
            "lora_target_modules: {missing} is not a layer of {base_model}; its layers are "
            '{names}, or give "all-linear"',
            missing=", ".join(missing),
            base_model=base_model,
            names=names,
        ),
        details=[{"field": "hyperparameters.lora_target_modules", "message": tr("not a layer")}],
    )


def _quantization_support(
    requested: HyperparameterRequest, device_plan: DevicePlan, target: EstimateTarget | None
) -> QuantizationSupport:
    """The quantized bases the job may train on: a 400 if it asks for one it cannot have."""
    if target is not None:  # another machine: bitsandbytes assumed installed there
        return QuantizationSupport(QUANTIZED)
    support = device_plan.quantization
    try:
        support.check(
            requested.quantization, device=device_plan.device, processes=requested.process_count
        )
    except QuantizationUnavailable as exc:
        raise BadRequest(
            tr("quantization: {exc}", exc=exc),
            param="hyperparameters.quantization",
            details=[{"field": "hyperparameters.quantization", "message": str(exc)}],
        ) from exc
    return support


@dataclass(kw_only=True)
class Estimate(MemoryPlan):
    """POST /jobs/estimate: the memory plan, the values the job would train with, about how
    long it would take, and what to change if it does not fit."""

    hyperparameters: ResolvedHyperparameters
    estimated_seconds: float | None  # the training loop's time: None when it cannot be told
    # start to end: the loop and the time the last job spent outside it (loading, measuring
    # what the base knows, saving); from the matrix speed, the loop alone
    estimated_run_seconds: float | None
    # what the time is estimated from: the last job on this model and device, or (before
    # one, on the CPU) this machine's measured matrix speed, a rough figure
    estimated_from: Literal["last_job", "matrix_speed"] | None
    advice: str | None  # None when it fits


def estimate(
    session: Session,
    *,
    user: User,
    storage: Storage,
    settings: Settings,
    request: JobCreate,
    device_plan: DevicePlan,
    target: EstimateTarget | None = None,
) -> Estimate:
    request, _ = continued_request(session, user=user, storage=storage, request=request)
    base_model = base_model_of(request, settings)
    check_base_model(base_model, user=user, settings=settings)
    pairs, _ = training_pairs(session, user=user, storage=storage, request=request)
    training_method(request, pairs)  # the same refusals as creating the job
    planned = plan_for(base_model, pairs, request, settings, device_plan, target)
    plan = planned.plan
    here = target is None
    speed = _speed(session, base_model, planned, device_plan) if here else None
    return Estimate(
        **plan.memory.as_dict(),
        hyperparameters=plan.hyperparameters,
        estimated_seconds=round(speed.loop_seconds(planned), 1) if speed else None,
        estimated_run_seconds=round(speed.run_seconds(planned), 1) if speed else None,
        estimated_from=speed.source if speed else None,
        advice=None if plan.memory.fits else plan.memory.refusal().text(),
    )


@dataclass(frozen=True)
class _Speed:
    tokens_per_second: float
    source: Literal["last_job", "matrix_speed"]
    # the last job's time outside its training loop (loading, measuring, saving); none
    # known from the matrix speed
    overhead_seconds: float = 0.0

    def loop_seconds(self, planned: _Planned) -> float:
        tokens = planned.epoch_tokens * planned.plan.hyperparameters.expected_epochs  # auto:
        return tokens / self.tokens_per_second  # the epochs expected, not the cap

    def run_seconds(self, planned: _Planned) -> float:
        return self.loop_seconds(planned) + self.overhead_seconds


def _speed(
    session: Session, base_model: str, planned: _Planned, device_plan: DevicePlan
) -> _Speed | None:
    """The last job's on the same model and device; before one, a rough figure from this
    machine's measured matrix speed (the CPU: a GPU's is not measured in the API)."""
    plan = planned.plan
    last = session.scalar(
        select(Job)
        .where(
            Job.base_model == base_model,
            Job.status == JobStatus.SUCCEEDED,
            Job.device == plan.memory.device,
        )
        .order_by(Job.id.desc())
        .limit(1)
    )
    if last is not None and last.metrics.tokens_per_second:
        overhead = 0.0
        if last.started_at and last.finished_at and last.metrics.train_runtime_s is not None:
            run = (last.finished_at - last.started_at).total_seconds()
            overhead = max(0.0, run - last.metrics.train_runtime_s)
        return _Speed(last.metrics.tokens_per_second, "last_job", overhead)
    if plan.memory.device != "cpu":
        return None
    gflops = cpu_gflops(device_plan.capabilities.cpu_count)
    return _Speed(rough_tokens_per_second(planned.shape, gflops), "matrix_speed")


def check_fit_and_time(
    session: Session,
    request: JobCreate,
    pairs: list[QAPair],
    settings: Settings,
    device_plan: DevicePlan,
) -> float | None:
    """Refuse a job that cannot fit here; else about how long its run will take, start to
    end, from one plan (None where it cannot be told: a shape unknown offline, a GPU
    before its first job on the model)."""
    base_model = base_model_of(request, settings)
    try:
        planned = plan_for(base_model, pairs, request, settings, device_plan)
    except ShapeUnknown:
        return None  # shape unknown offline: the trainer checks again once it has the model
    if not planned.plan.memory.fits:
        raise NotPossibleHere(
            planned.plan.memory.refusal().text(),
            details=[{"field": "base_model", "message": tr("does not fit in memory")}],
        )
    speed = _speed(session, base_model, planned, device_plan)
    return round(speed.run_seconds(planned), 1) if speed else None
