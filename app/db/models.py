"""The tables: users own API keys, datasets, jobs and evals; a job has an ordered stream of
events, an eval its runs, a run its output items.

A job's JSON columns hold typed values (db/json_types.py), never dicts read by key."""

from datetime import datetime

from sqlalchemy import (
    JSON,
    Boolean,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.core.language import Sentence, shown
from app.db.base import Base, UTCDateTime, utcnow
from app.db.json_types import typed_json
from app.graders.evals import (
    CompletionsSource,
    Criterion,
    CriterionResult,
    CustomDataSourceConfig,
    JsonlSource,
    RunCounts,
    RunDataSource,
    SampleRecord,
)
from app.graders.run_status import RunStatus
from app.graders.spec import AnyGrader, Grader
from app.jobs.metrics import JobMetrics
from app.jobs.status import JobStatus
from app.ml.events import EventData
from app.ml.hyperparameters import HyperparameterRequest, ResolvedHyperparameters
from app.ml.planner import MemoryPlan
from app.ml.training.judges import JudgeModel

# Without AUTOINCREMENT SQLite may hand a deleted row's id to the next row; a job id
# that points to a different job later would be confusing in logs and URLs.
_NO_ID_REUSE = {"sqlite_autoincrement": True}


class User(Base):
    __tablename__ = "users"
    __table_args__ = _NO_ID_REUSE

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # Tokens issued before this are refused: changing the password signs out everywhere.
    password_changed_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # Set by an admin: no sign-in, token or API key of this user works while it is set.
    disabled_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)

    @property
    def disabled(self) -> bool:
        return self.disabled_at is not None


class ApiKey(Base):
    """A long-lived bearer secret (`qk-…`) that acts as its user; only its hash is kept."""

    __tablename__ = "api_keys"
    __table_args__ = _NO_ID_REUSE

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    prefix: Mapped[str] = mapped_column(String(16))  # shown to tell keys apart, not secret
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)

    owner: Mapped[User] = relationship()


class Dataset(Base):
    __tablename__ = "datasets"
    __table_args__ = _NO_ID_REUSE

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    format: Mapped[str] = mapped_column(String(16))
    # What it holds (app/ml/pairs.py, data_kind); None: uploaded before it was kept
    kind: Mapped[str | None] = mapped_column(String(16), nullable=True)
    num_examples: Mapped[int] = mapped_column(Integer)
    size_bytes: Mapped[int] = mapped_column(Integer)
    sha256: Mapped[str] = mapped_column(String(64))
    purpose: Mapped[str] = mapped_column(
        String(32), default="fine-tune", server_default="fine-tune"
    )
    # What reading the file passed over (a sheet without a table, a column not read)
    notes: Mapped[list[Sentence] | None] = mapped_column(
        typed_json("NotesJSON", list[Sentence], lenient=True), nullable=True, default=None
    )
    # Names the normalized file on disk; generated, never taken from the user.
    storage_key: Mapped[str] = mapped_column(String(32), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    owner: Mapped[User] = relationship()


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = _NO_ID_REUSE

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    dataset_id: Mapped[int | None] = mapped_column(
        ForeignKey("datasets.id", ondelete="SET NULL"), nullable=True
    )
    validation_dataset_id: Mapped[int | None] = mapped_column(
        ForeignKey("datasets.id", ondelete="SET NULL"), nullable=True
    )
    name: Mapped[str] = mapped_column(String(200))
    suffix: Mapped[str | None] = mapped_column(String(64), nullable=True)  # in the model's id
    labels: Mapped[dict[str, str] | None] = mapped_column(JSON, nullable=True)  # "metadata"
    base_model: Mapped[str] = mapped_column(String(500))
    # Fine-tuning a fine-tuned model: the job it started from (no foreign key: that job may
    # go, this one keeps its own copy of the weights) and that model's name then.
    parent_job_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    start_model: Mapped[str | None] = mapped_column(String(600), nullable=True)
    # supervised (question-answer pairs), dpo (preference pairs) or reinforcement (prompts
    # whose sampled answers `grader` scores)
    method: Mapped[str] = mapped_column(
        String(16), default="supervised", server_default="supervised"
    )
    grader: Mapped[AnyGrader | None] = mapped_column(
        typed_json("GraderJSON", Grader), nullable=True
    )
    # Its judge models (score_model, label_model), resolved for the owner when it was made
    judges: Mapped[list[JudgeModel] | None] = mapped_column(
        typed_json("JudgesJSON", list[JudgeModel]), nullable=True
    )
    status: Mapped[str] = mapped_column(String(16), index=True, default=JobStatus.QUEUED)
    # What was asked, and what the run resolved it to, once.
    hyperparameters: Mapped[HyperparameterRequest] = mapped_column(
        typed_json("HyperparametersJSON", HyperparameterRequest, empty={}),
        default=HyperparameterRequest(),
    )
    resolved_hyperparameters: Mapped[ResolvedHyperparameters | None] = mapped_column(
        typed_json("ResolvedJSON", ResolvedHyperparameters), nullable=True
    )
    num_examples: Mapped[int] = mapped_column(Integer)
    storage_key: Mapped[str] = mapped_column(String(32), unique=True)

    step: Mapped[int] = mapped_column(Integer, default=0)
    total_steps: Mapped[int | None] = mapped_column(Integer, nullable=True)
    epoch: Mapped[float] = mapped_column(Float, default=0.0)
    eta_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    # About how long its run takes, start to end, as estimated when it was asked for (None:
    # not to be told then), for the start of the queued jobs behind it
    estimated_run_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    metrics: Mapped[JobMetrics] = mapped_column(
        typed_json("MetricsJSON", JobMetrics), default=JobMetrics()
    )
    # The memory plan, once the run has made it ({} stored until then).
    plan: Mapped[MemoryPlan | None] = mapped_column(
        typed_json("PlanJSON", MemoryPlan, empty={}), default=None
    )
    device: Mapped[str | None] = mapped_column(String(16), nullable=True)
    dtype: Mapped[str | None] = mapped_column(String(16), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # The error as a sentence, read in each reader's language (None: as `error` says)
    error_said: Mapped[Sentence | None] = mapped_column(
        typed_json("ErrorSentenceJSON", Sentence, lenient=True), nullable=True, default=None
    )

    def error_text(self) -> str | None:
        """The error in the language of the request being answered."""
        return shown(self.error_said, self.error)

    attempts: Mapped[int] = mapped_column(Integer, default=0)  # runs started
    # Runs that died without a new checkpoint since the last one died: what
    # QATUNE_MAX_JOB_ATTEMPTS caps. A service restart never counts.
    failures: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    checkpoint_step: Mapped[int | None] = mapped_column(Integer, nullable=True)
    interrupted_at_step: Mapped[int | None] = mapped_column(Integer, nullable=True)
    worker_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    pause_requested: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # Paused because the disk was full: the worker queues it again once there is room.
    waiting_for_disk: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # The trained model was deleted (DELETE /v1/models/{id}): the job stays, its adapter goes.
    model_deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)

    owner: Mapped[User] = relationship()


class JobEvent(Base):
    __tablename__ = "job_events"
    __table_args__ = (UniqueConstraint("job_id", "seq"), _NO_ID_REUSE)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    seq: Mapped[int] = mapped_column(Integer)
    ts: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    level: Mapped[str] = mapped_column(String(8))
    message: Mapped[str] = mapped_column(Text)  # in English, as written
    # The message as a template and its values, read in each reader's language (None: an
    # event written before sentences were kept; its English message is shown).
    said: Mapped[Sentence | None] = mapped_column(
        typed_json("SentenceJSON", Sentence, lenient=True), nullable=True, default=None
    )

    def text(self) -> str:
        """The message in the language of the request being answered."""
        return shown(self.said, self.message) or ""

    # What the event reports, by its kind ({} stored for a message alone).
    data: Mapped[EventData | None] = mapped_column(
        typed_json("EventDataJSON", EventData | None, empty={}, lenient=True), default=None
    )


class JobCurvePoint(Base):
    """A progress event's figures, beside the event: a long job's chart is averaged from
    these numbers in the database, where reading them out of 100,000 events' JSON took a
    second (SQLite parses a document again for every value it extracts)."""

    __tablename__ = "job_curve"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)  # the event's
    step: Mapped[int] = mapped_column(Integer)
    loss: Mapped[float | None] = mapped_column(Float)
    reward_margin: Mapped[float | None] = mapped_column(Float)  # DPO
    reward_mean: Mapped[float | None] = mapped_column(Float)  # reinforcement


class Eval(Base):
    """An eval: what its items look like and the criteria each answer is graded by."""

    __tablename__ = "evals"
    __table_args__ = _NO_ID_REUSE

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    data_source_config: Mapped[CustomDataSourceConfig] = mapped_column(
        typed_json("DataSourceConfigJSON", CustomDataSourceConfig)
    )
    testing_criteria: Mapped[list[Criterion]] = mapped_column(
        typed_json("TestingCriteriaJSON", list[Criterion])
    )
    labels: Mapped[dict[str, str] | None] = mapped_column(JSON, nullable=True)  # "metadata"
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    owner: Mapped[User] = relationship()


class EvalRun(Base):
    """One run of an eval: a model's answers to its items (or answers given), graded."""

    __tablename__ = "eval_runs"
    __table_args__ = _NO_ID_REUSE

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    eval_id: Mapped[int] = mapped_column(ForeignKey("evals.id", ondelete="CASCADE"), index=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), default=RunStatus.QUEUED)  # run_status.py
    model: Mapped[str | None] = mapped_column(String(600), nullable=True)
    data_source: Mapped[CompletionsSource | JsonlSource] = mapped_column(
        typed_json("RunDataSourceJSON", RunDataSource)
    )
    counts: Mapped[RunCounts] = mapped_column(
        typed_json("RunCountsJSON", RunCounts, empty={}), default=RunCounts
    )
    labels: Mapped[dict[str, str] | None] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    error_said: Mapped[Sentence | None] = mapped_column(
        typed_json("RunErrorSentenceJSON", Sentence, lenient=True), nullable=True, default=None
    )

    def error_text(self) -> str | None:
        """The error in the language of the request being answered."""
        return shown(self.error_said, self.error)

    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)

    eval: Mapped[Eval] = relationship()


class EvalOutputItem(Base):
    """One item of a run: the item, what the model said, and each criterion's verdict."""

    __tablename__ = "eval_output_items"
    __table_args__ = _NO_ID_REUSE

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("eval_runs.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)  # the item's place in the data source
    status: Mapped[str] = mapped_column(String(8))  # pass, fail, error
    item: Mapped[dict[str, object]] = mapped_column(JSON)
    sample: Mapped[SampleRecord] = mapped_column(typed_json("SampleJSON", SampleRecord))
    results: Mapped[list[CriterionResult]] = mapped_column(
        typed_json("ResultsJSON", list[CriterionResult])
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
