"""Fine-tuning jobs as OpenAI's API has them. A field a request does not know is a 400 that
names it, with the field it was likely meant to be (`n_epoch`: did you mean n_epochs?), as
OpenAI's own API refuses it: ignored, a misspelt one ran a job with auto epochs instead."""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.graders.spec import Grader
from app.ml.events import Evaluated, EventData, Progress
from app.ml.hyperparameters import DEFAULT_GROUP_SIZE
from app.ml.quantization import QuantizationRequest
from app.schemas.common import Label, LabelValue
from app.schemas.openai.common import Listed

Auto = Literal["auto"]
Epochs = Annotated[int, Field(ge=1, le=100)] | Auto
BatchSize = Annotated[int, Field(ge=1, le=512)] | Auto
Multiplier = Annotated[float, Field(gt=0, le=100)] | Auto


class Hyperparameters(BaseModel):
    model_config = ConfigDict(extra="forbid")

    n_epochs: Epochs = "auto"
    batch_size: BatchSize = "auto"
    learning_rate_multiplier: Multiplier = "auto"
    # A qatune extension (the base's weights in training): OpenAI's client sends it through
    # `extra_body` or a plain dict, and ignores it in answers.
    quantization: QuantizationRequest = Field(
        default="auto",
        description="qatune only: none, 8bit, 4bit (QLoRA) or auto (quantized only if the "
        "base would not fit otherwise)",
    )


class SupervisedMethod(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hyperparameters: Hyperparameters = Field(default_factory=Hyperparameters)


class DpoHyperparameters(Hyperparameters):
    beta: Annotated[float, Field(gt=0, le=10)] | Auto = "auto"


class DpoMethod(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hyperparameters: DpoHyperparameters = Field(default_factory=DpoHyperparameters)


class ReinforcementHyperparameters(Hyperparameters):
    compute_multiplier: Annotated[float, Field(gt=0, le=8)] | Auto = Field(
        default="auto", description="scales the answers sampled per prompt (8 at 1)"
    )
    eval_interval: Annotated[int, Field(ge=1, le=1_000_000)] | Auto = "auto"
    eval_samples: Annotated[int, Field(ge=1, le=64)] | Auto = "auto"
    reasoning_effort: Literal["default", "low", "medium", "high"] = Field(
        default="default", description="only default: no model served here reasons"
    )
    beta: Annotated[float, Field(gt=0, le=10)] | Auto = Field(
        default="auto", description="qatune only: the KL coefficient to the starting model"
    )

    @property
    def group_size(self) -> int | Auto:
        """Answers sampled per prompt: compute_multiplier times qatune's default."""
        if self.compute_multiplier == "auto":
            return "auto"
        return max(2, min(64, round(DEFAULT_GROUP_SIZE * self.compute_multiplier)))

    @staticmethod
    def multiplier_of(group_size: int | Auto) -> float | Auto:
        return "auto" if group_size == "auto" else group_size / DEFAULT_GROUP_SIZE


class ReinforcementMethod(BaseModel):
    model_config = ConfigDict(extra="forbid")

    grader: Grader
    hyperparameters: ReinforcementHyperparameters = Field(
        default_factory=ReinforcementHyperparameters
    )


class Method(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["supervised", "dpo", "reinforcement"] = "supervised"
    supervised: SupervisedMethod | None = None
    dpo: DpoMethod | None = None
    reinforcement: ReinforcementMethod | None = None


class FineTuningJobCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, max_length=500, description="the base model")
    training_file: str = Field(
        min_length=1,
        max_length=40,
        description="file-… uploaded for fine-tune",
        json_schema_extra={"pattern": "^file-[0-9]+$"},  # others are OpenAI's 400
    )
    validation_file: str | None = Field(
        default=None, max_length=40, json_schema_extra={"pattern": "^file-[0-9]+$"}
    )
    hyperparameters: Hyperparameters | None = Field(
        default=None, description="deprecated by OpenAI in favour of method; either works"
    )
    method: Method | None = None
    suffix: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    seed: int | None = Field(default=None, ge=0, le=2**31 - 1)
    metadata: dict[Label, LabelValue] | None = Field(default=None, max_length=16)
    integrations: list[dict[str, Any]] | None = Field(
        default=None, description="not supported by qatune: a 400 unless empty"
    )


class JobError(BaseModel):
    code: str
    message: str
    param: str | None = None


class FineTuningJob(Listed):
    object: Literal["fine_tuning.job"] = "fine_tuning.job"
    created_at: int
    error: JobError | None
    fine_tuned_model: str | None
    finished_at: int | None
    hyperparameters: Hyperparameters
    model: str
    organization_id: str
    result_files: list[str]
    seed: int
    status: Literal[
        "validating_files", "queued", "running", "paused", "succeeded", "failed", "cancelled"
    ]
    trained_tokens: int | None
    training_file: str | None
    validation_file: str | None
    estimated_finish: int | None
    integrations: list[dict[str, Any]] | None = None
    metadata: dict[str, str] | None
    method: Method


class StepMetrics(BaseModel):
    """A training step's figures, under OpenAI's names."""

    # read from a step's Progress: only the loss is named otherwise there
    model_config = ConfigDict(from_attributes=True, validate_by_name=True)

    step: int
    total_steps: int
    train_loss: float = Field(validation_alias="loss")
    learning_rate: float
    tokens_per_second: float
    epoch: float
    reward_margin: float | None = None  # DPO: mean β-scaled margin, preferred over not
    reward_accuracy: float | None = None  # DPO: share of pairs ranked right


class ValidationMetrics(BaseModel):
    valid_loss: float
    valid_exact_match: float


EventDataOut = StepMetrics | ValidationMetrics | EventData | None


def event_data(data: EventData | None) -> EventDataOut:
    """An event's data as OpenAI's events carry it: a step's and a validation's figures
    under OpenAI's names, anything else as qatune reports it."""
    match data:
        case Progress():
            return StepMetrics.model_validate(data)
        case Evaluated():
            return ValidationMetrics(
                valid_loss=data.eval_loss, valid_exact_match=data.eval_exact_match
            )
    return data


class Event(Listed):
    object: Literal["fine_tuning.job.event"] = "fine_tuning.job.event"
    created_at: int
    level: Literal["info", "warn", "error"]
    message: str
    type: Literal["message", "metrics"]
    data: EventDataOut = Field(
        description="metrics under OpenAI's names, or what qatune's event reports by its kind"
    )


class CheckpointMetrics(BaseModel):
    step: float | None = None
    train_loss: float | None = None
    valid_loss: float | None = None


class Checkpoint(Listed):
    object: Literal["fine_tuning.job.checkpoint"] = "fine_tuning.job.checkpoint"
    created_at: int
    fine_tuned_model_checkpoint: str
    fine_tuning_job_id: str
    metrics: CheckpointMetrics
    step_number: int
