from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Auto = Literal["auto"]
JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]


class HyperparametersIn(BaseModel):
    """Every field may be "auto": the trainer picks a value for the model, data and device."""

    model_config = ConfigDict(extra="forbid")

    epochs: Annotated[int, Field(ge=1, le=100)] | Auto = "auto"
    max_steps: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    learning_rate: Annotated[float, Field(gt=0, le=0.1)] | Auto = "auto"
    batch_size: Annotated[int, Field(ge=1, le=512)] | Auto = "auto"
    gradient_accumulation_steps: Annotated[int, Field(ge=1, le=512)] | Auto = "auto"
    lora_r: Annotated[int, Field(ge=1, le=256)] | Auto = "auto"
    lora_alpha: Annotated[int, Field(ge=1, le=1024)] | Auto = "auto"
    lora_dropout: Annotated[float, Field(ge=0, lt=1)] | Auto = "auto"
    lora_target_modules: (
        Literal["all-linear"]
        | Annotated[
            list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.]+$", max_length=100)]],
            Field(min_length=1, max_length=32),
        ]
    ) = "all-linear"
    max_seq_length: Annotated[int, Field(ge=16, le=32768)] | Auto = "auto"
    validation_split: Annotated[float, Field(ge=0, le=0.5)] | Auto = "auto"
    seed: Annotated[int, Field(ge=0, le=2**31 - 1)] = 42
    precision: Literal["auto", "bf16", "fp16", "fp32"] = "auto"
    gradient_checkpointing: Literal["auto", "true", "false"] = "auto"


class JobCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base_model: str | None = Field(default=None, min_length=1, max_length=500)
    dataset_id: int | None = None
    qa_pairs: list[dict[str, Any]] | None = Field(default=None, min_length=1, max_length=50_000)
    name: str | None = Field(default=None, max_length=200)
    hyperparameters: HyperparametersIn = Field(default_factory=HyperparametersIn)

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
    hyperparameters: dict[str, Any]
    progress: Progress
    metrics: dict[str, Any]
    plan: dict[str, Any]
    device: str | None
    dtype: str | None
    error: str | None
    attempts: int
    cancel_requested: bool
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


class QueryOut(BaseModel):
    job_id: int
    question: str
    answer: str
    base_answer: str | None = None
    base_model: str
    device: str
    seconds: float
