"""Jobs as the native API takes and shows them: a new job, its progress, metrics and actions, a
page of jobs, its log's events."""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.core.language import tr
from app.graders.spec import Grader
from app.jobs.limits import MAX_PAIRS
from app.jobs.metrics import JobMetrics, Outcome
from app.jobs.status import JobAction, JobStatus
from app.ml.events import EventData
from app.ml.events import Progress as ProgressEvent
from app.ml.export import DEFAULT_GGUF_TYPE, GgufType
from app.ml.hyperparameters import HyperparameterRequest, ResolvedHyperparameters
from app.ml.planner import MemoryPlan
from app.ml.training.metrics import EvaluationReport
from app.schemas.common import MAX_JSON_INT, Label, LabelValue
from app.schemas.qa import BASE_MODEL_PATTERN, QA_RECORD_SCHEMA

Method = Literal["supervised", "dpo", "reinforcement"]


def _optional_not_null(schema: dict[str, Any]) -> None:
    """Documented as optional but never null: leave it out, or give a value."""
    branches = [b for b in schema.pop("anyOf", []) if b.get("type") != "null"]
    if branches:
        schema.update(branches[0])
    schema.pop("default", None)


def _qa_pairs_schema(schema: dict[str, Any]) -> None:
    _optional_not_null(schema)
    schema["items"] = QA_RECORD_SCHEMA


def _one_data_source_schema(schema: dict[str, Any]) -> None:
    # What the validator below enforces, said in the document: exactly one of the two.
    schema["oneOf"] = [{"required": ["dataset_id"]}, {"required": ["qa_pairs"]}]
    # And what services/jobs.create_job refuses: a validation file and a split.
    split = {"type": "number", "not": {"const": 0}}
    schema["not"] = {
        "required": ["validation_dataset_id", "hyperparameters"],
        "properties": {
            "validation_dataset_id": {"type": "integer"},
            "hyperparameters": {
                "required": ["validation_split"],
                "properties": {"validation_split": split},
            },
        },
    }
    # A checkpoint is of a job: base_checkpoint_step only with base_job_id.
    schema["dependentRequired"] = {"base_checkpoint_step": ["base_job_id"]}


class JobCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_one_data_source_schema)

    base_model: str | None = Field(
        default=None,
        max_length=500,
        pattern=BASE_MODEL_PATTERN,
        description="builtin:tiny, a hub id, a configured model, or (admins) an absolute path",
        json_schema_extra=_optional_not_null,
    )
    dataset_id: int | None = Field(
        default=None, ge=1, le=MAX_JSON_INT, json_schema_extra=_optional_not_null
    )
    qa_pairs: list[dict[str, Any]] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_PAIRS,
        description="the pairs inline, in any of the upload's record shapes",
        json_schema_extra=_qa_pairs_schema,
    )
    name: str | None = Field(
        default=None,
        max_length=200,
        description="default: the suffix, method and what it starts from, as "
        '"kiki: DPO on faq (job 3), 40 preference pairs"',
        json_schema_extra=_optional_not_null,
    )
    validation_dataset_id: int | None = Field(
        default=None,
        ge=1,
        le=MAX_JSON_INT,
        description="evaluate on this dataset instead of a split of the training pairs",
        json_schema_extra=_optional_not_null,
    )
    suffix: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_.-]{1,64}$",
        description="added to the trained model's id: ft:{base}:{owner}:{suffix}:{job id}",
        json_schema_extra=_optional_not_null,
    )
    metadata: dict[Label, LabelValue] | None = Field(
        default=None,
        max_length=16,
        description="up to 16 labels of your own, kept with the job",
        json_schema_extra=_optional_not_null,
    )
    base_job_id: int | None = Field(
        default=None,
        ge=1,
        le=MAX_JSON_INT,
        description="fine-tune this job's model further (yours; its base and LoRA shape)",
        json_schema_extra=_optional_not_null,
    )
    base_checkpoint_step: int | None = Field(
        default=None,
        ge=1,
        le=MAX_JSON_INT,
        description="with base_job_id: start from this checkpoint of it instead",
        json_schema_extra=_optional_not_null,
    )
    method: Method | None = Field(
        default=None,
        description="supervised (question-answer pairs), dpo (preference pairs) or "
        "reinforcement (GRPO: answers sampled and scored by `grader`); default: "
        "reinforcement with a grader, else what the data holds",
        json_schema_extra=_optional_not_null,
    )
    grader: Grader | None = Field(
        default=None,
        description="reinforcement: the grader that scores each sampled answer (OpenAI's "
        "grader JSON; {{item.question}} and {{item.answer}} name the pair's fields)",
        json_schema_extra=_optional_not_null,
    )
    hyperparameters: HyperparameterRequest = Field(default_factory=HyperparameterRequest)

    @field_validator(
        "method",
        "grader",
        "base_job_id",
        "base_checkpoint_step",
        "base_model",
        "dataset_id",
        "qa_pairs",
        "name",
        "validation_dataset_id",
        "suffix",
        "metadata",
        mode="before",
    )
    @classmethod
    def _null_is_not_a_value(cls, value: Any) -> Any:
        if value is None:
            raise ValueError(tr("null is not a value here; leave the field out"))
        return value

    @model_validator(mode="after")
    def _one_data_source(self) -> "JobCreate":
        if (self.dataset_id is None) == (self.qa_pairs is None):
            raise ValueError(tr("give exactly one of dataset_id or qa_pairs"))
        if self.base_checkpoint_step is not None and self.base_job_id is None:
            raise ValueError(tr("base_checkpoint_step needs base_job_id: the job it is of"))
        return self


class EstimateTarget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    device: Literal["cuda", "mps", "cpu"]
    memory_gb: float = Field(gt=0, le=4096)


class JobEstimate(JobCreate):
    target: EstimateTarget | None = None


class Progress(BaseModel):
    step: int
    total_steps: int | None  # auto epochs: the expected end, an estimate
    epoch: float
    expected_epochs: float | None = Field(
        default=None,
        description="auto epochs (until every answer is learned): about how many epochs the "
        "job will take, estimated from the data and refined as it learns",
    )
    percent: float = Field(description="never goes back while the job runs")
    eta_seconds: float | None


class JobOut(BaseModel):
    id: int
    name: str
    status: JobStatus
    jobs_ahead: int | None = Field(
        description="queued: the queued jobs that run before it, as the line stands now "
        "(a turn per user in rotation: one user's many jobs do not hold others back)"
    )
    estimated_run_seconds: float | None = Field(
        description="about how long its run takes, start to end, as estimated when it was "
        "asked for (null: not to be told then)"
    )
    starts_in_seconds: float | None = Field(
        description="queued: about how long until it starts, from the running jobs' time "
        "left and each job's before it as estimated when it was asked for (null: one of "
        "them cannot be told, as on a GPU before the model's first job there)"
    )
    owner: str
    base_model: str
    method: Method
    grader: Grader | None  # reinforcement's
    base_job_id: int | None  # the job whose model this one trained further, if any
    start_model: str | None  # that model's name (a checkpoint's, if it started from one)
    dataset_id: int | None
    num_examples: int
    fine_tuned_model: str | None  # the trained model's id, as the OpenAI API names it
    suffix: str | None
    metadata: dict[str, str] | None
    validation_dataset_id: int | None
    hyperparameters: HyperparameterRequest  # as asked
    resolved_hyperparameters: ResolvedHyperparameters | None  # as the run resolved them
    progress: Progress
    metrics: JobMetrics
    outcome: Outcome | None = Field(
        description="auto epochs, once finished: how many training answers were learned "
        "against the target of all of them (a job can succeed below it)"
    )
    plan: MemoryPlan | None  # the memory plan, once the run has made it
    device: str | None
    dtype: str | None
    error: str | None
    attempts: int  # runs started
    failures: int  # runs that died without progress (QATUNE_MAX_JOB_ATTEMPTS caps these)
    checkpoint_step: int | None  # the newest checkpoint's step
    cancel_requested: bool
    pause_requested: bool
    # paused because the disk was full (goes on once it has room), or running while it is
    # full (its end is recorded once the database can be written)
    waiting_for_disk: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    actions: list[JobAction] = Field(description="what you may do to the job now")


class MessageOnly(BaseModel):
    """The data of an event that is a message alone."""

    model_config = ConfigDict(extra="forbid")


class EventOut(BaseModel):
    seq: int
    ts: datetime
    level: str
    message: str
    data: EventData | MessageOnly = Field(description="what the event reports, by its kind")


class LogFeed(BaseModel):
    """A job's log as a feed read on from where the reader stopped (`next_after`), with
    the job's status to know when to stop polling: not a page of a list (`Page`)."""

    events: list[EventOut]
    next_after: int
    status: JobStatus


class SeriesPointOut(BaseModel):
    step: int = Field(description="the last step of the bucket the figures are the mean of")
    loss: float | None
    reward_margin: float | None = Field(description="DPO")
    reward_mean: float | None = Field(description="reinforcement")


class ProgressSeriesOut(BaseModel):
    points: list[SeriesPointOut]
    steps_read: int = Field(description="progress events behind the points")
    through: int = Field(
        description="the last progress event's seq: follow the log stream from here for more"
    )
    latest: ProgressEvent | None = Field(description="that event")


class QueryIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=8000)
    max_new_tokens: int | None = Field(
        default=None,
        ge=1,
        le=2048,
        description="default: twice the adapter's longest training answer, 256 at least",
    )
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


class ExportOut(BaseModel):
    """One export of a job's model; `download` is its URL once `status` is ready."""

    format: str = Field(description="merged | gguf")
    outtype: str | None = Field(description="gguf: f16 | bf16 | q8_0")
    status: str = Field(description="not_started | running | ready | failed")
    progress: float = Field(description="0 to 1")
    message: str
    size_bytes: int | None = Field(description="the finished file's size, once ready")
    estimated_bytes: int | None = Field(
        default=None, description="about how large it will be (the base model on disk)"
    )
    error: str | None
    download: str


__all__ = ["DEFAULT_GGUF_TYPE", "EvaluationReport", "GgufType"]  # the API's, from app.ml


class JobEvalIn(BaseModel):
    """Grade the job's model on a held-out file of yours: each pair's question (in its
    conversation) asked greedily, each answer graded against the pair's answer."""

    model_config = ConfigDict(extra="forbid")

    dataset_id: int = Field(ge=1, description="a dataset of yours, e.g. held-out pairs")
    criteria: list[Literal["exact", "contains", "similar"]] = Field(
        default=["exact", "similar"],
        min_length=1,
        description="exact: the same answer; contains: the answer within it (any case); "
        "similar: ROUGE-L of at least 0.6",
    )
    compare_base: bool = Field(default=True, description="also run the base model")


class JobEvalOut(BaseModel):
    eval_id: str
    run_ids: list[str]  # the model's run, then the base model's
    report_url: str = Field(description="the admin UI's page: both runs side by side")
