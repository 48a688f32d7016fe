from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.db.models import JobStatus
from app.ml.hyperparameters import HyperparameterRequest


class JobCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base_model: str | None = Field(default=None, min_length=1, max_length=500)
    dataset_id: int | None = Field(default=None, ge=1, le=2**63 - 1)
    qa_pairs: list[dict[str, Any]] | None = Field(default=None, min_length=1, max_length=50_000)
    name: str | None = Field(default=None, max_length=200)
    hyperparameters: HyperparameterRequest = Field(default_factory=HyperparameterRequest)

    @model_validator(mode="after")
    def _one_data_source(self) -> "JobCreate":
        if (self.dataset_id is None) == (self.qa_pairs is None):
            raise ValueError("give exactly one of dataset_id or qa_pairs")
        return self


class EstimateTarget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    device: Literal["cuda", "mps", "cpu"]
    memory_gb: float = Field(gt=0, le=4096)


class JobEstimate(JobCreate):
    target: EstimateTarget | None = None


class Progress(BaseModel):
    step: int
    total_steps: int | None
    epoch: float
    percent: float
    eta_seconds: float | None


class JobOut(BaseModel):
    id: int
    name: str
    status: JobStatus
    owner: str
    base_model: str
    dataset_id: int | None
    num_examples: int
    hyperparameters: dict[str, Any]  # as asked
    resolved_hyperparameters: dict[str, Any] | None  # as the run resolved them
    progress: Progress
    metrics: dict[str, Any]
    plan: dict[str, Any]
    device: str | None
    dtype: str | None
    error: str | None
    attempts: int  # runs started
    failures: int  # runs that died without progress (QATUNE_MAX_JOB_ATTEMPTS caps these)
    checkpoint_step: int | None  # the newest checkpoint's step
    cancel_requested: bool
    pause_requested: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class JobPage(BaseModel):
    items: list[JobOut]
    total: int
    limit: int
    offset: int


class EventOut(BaseModel):
    seq: int
    ts: datetime
    level: str
    message: str
    data: dict[str, Any]


class EventPage(BaseModel):
    events: list[EventOut]
    next_after: int
    status: JobStatus


class QueryIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=8000)
    max_new_tokens: int = Field(default=256, ge=1, le=2048)
    temperature: float = Field(default=0.0, ge=0, le=2)
    top_p: float = Field(default=1.0, gt=0, le=1)
    compare_base: bool = Field(default=False, description="also answer with the bare base model")
    checkpoint_step: int | None = Field(
        default=None, ge=1, le=10**9, description="ask this checkpoint instead of the final model"
    )


class CheckpointOut(BaseModel):
    step: int
    train_loss: float | None
    created_at: datetime


class QueryOut(BaseModel):
    job_id: int
    question: str
    answer: str
    base_answer: str | None = None
    base_model: str
    device: str
    seconds: float
