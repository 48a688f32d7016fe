"""What /system/* and /health answer: the device plan, readiness, the serving engines."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from app.ml.device import Capabilities, DeviceBenchmark, DevicePlan
from app.ml.serving.requests import EngineStats


class DeviceReport(BaseModel):
    """The device plan of this process: what training and serving use here, and why."""

    device: str
    precision: str
    loss_scaling: bool
    memory_budget_gb: float
    reasons: list[str]
    requested: str
    benchmark: DeviceBenchmark | None
    capabilities: Capabilities

    @classmethod
    def of(cls, plan: DevicePlan) -> "DeviceReport":
        return cls(
            device=plan.device,
            precision=plan.precision,
            loss_scaling=plan.loss_scaling,
            memory_budget_gb=plan.memory_budget_gb,
            reasons=[reason.text() for reason in plan.reasons],
            requested=plan.requested,
            benchmark=plan.benchmark,
            capabilities=plan.capabilities,
        )


class ReplicaReport(BaseModel):
    url: str
    up: bool
    running: int
    adapters: int
    problem: str
    restarts: int


class EngineReport(BaseModel):
    base_model: str
    running: int
    waiting: int
    adapters: list[str]
    adapter_megabytes: float
    backend: str = "builtin"  # or vllm (QATUNE_SERVING_BACKEND)
    replicas: list[ReplicaReport] = []  # vLLM's servers

    @classmethod
    def of(cls, stats: "EngineStats") -> "EngineReport":
        return cls(
            base_model=stats.base_model,
            running=stats.running,
            waiting=stats.waiting,
            adapters=stats.adapters,
            adapter_megabytes=round(stats.adapter_bytes / 2**20, 2),
            backend=stats.backend,
            replicas=[ReplicaReport(**vars(replica)) for replica in stats.replicas],
        )


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    worker: Literal["embedded", "external"]
    training_job: int | None  # the job the embedded worker trains now


class Readiness(BaseModel):
    """Each check: "ok", or what is wrong (the status is 503 then; a disk that is only
    low is a warning: "low: …", still ready)."""

    # executor, when the worker has one; serving, with QATUNE_SERVING_BACKEND=vllm: "ok", or
    # the base models none of whose vLLM servers is up
    model_config = ConfigDict(extra="allow")
    status: Literal["ready", "not ready"]
    database: str
    worker: str
    disk: str = "ok"  # the data directory's: "ok", "low: …" or "full: …"


class OfferedModel(BaseModel):
    name: str
    # builtin: made by qatune; packaged: installed from the package registry; configured:
    # QATUNE_BASE_MODELS; cached: a hub model downloaded here
    kind: Literal["builtin", "packaged", "configured", "cached"]
    description: str


ModelSource = Literal["builtin", "packaged", "configured", "cached", "hub", "local", "ollama"]


class ModelCheck(BaseModel):
    """Whether a job can start from a base model here (GET /models/check)."""

    name: str
    source: ModelSource  # hub: a hub id not downloaded here; local: a server directory
    usable: bool  # a job can start from it
    cached: bool  # its files are here: nothing to download
    message: str  # what it is, or why not and what to do


class AdapterMetrics(BaseModel):
    train_loss: float | None
    eval_exact_match: float | None


class TrainedModel(BaseModel):
    id: str  # as the OpenAI API names it
    job_id: int
    name: str
    base_model: str
    owner: str
    finished_at: datetime | None
    metrics: AdapterMetrics


class ModelsOut(BaseModel):
    base_models: list[OfferedModel]
    adapters: list[TrainedModel]
