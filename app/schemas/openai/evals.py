"""/v1/evals: OpenAI's Evals API shapes (evals, runs, output items)."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.graders.evals import (
    CompletionsSource,
    Criterion,
    CustomDataSourceConfig,
    FileId,
    JsonlSource,
    ModelUsage,
    RunDataSource,
    TemplateMessages,
)
from app.schemas.openai.common import Listed
from app.schemas.openai.files import FileObject

Metadata = dict[str, str]


class EvalCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, max_length=200)
    data_source_config: CustomDataSourceConfig
    testing_criteria: list[Criterion] = Field(min_length=1, max_length=32)
    metadata: Metadata | None = Field(default=None, max_length=16)


class EvalUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, max_length=200)
    metadata: Metadata | None = Field(default=None, max_length=16)


class DataSourceConfigOut(BaseModel):
    type: Literal["custom"] = "custom"
    schema_: dict[str, Any] = Field(alias="schema", serialization_alias="schema")

    model_config = ConfigDict(populate_by_name=True)


class EvalObject(Listed):
    object: Literal["eval"] = "eval"
    name: str
    created_at: int
    data_source_config: DataSourceConfigOut
    testing_criteria: list[Criterion]
    metadata: Metadata | None = None


class EvalDeleted(BaseModel):
    object: Literal["eval.deleted"] = "eval.deleted"
    deleted: bool = True
    eval_id: str


class RunCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, max_length=200)
    data_source: RunDataSource
    metadata: Metadata | None = Field(default=None, max_length=16)


class ApiError(BaseModel):
    code: str
    message: str


class ResultCounts(BaseModel):
    total: int
    errored: int
    failed: int
    passed: int


class CriterionCountsOut(BaseModel):
    testing_criteria: str
    passed: int
    failed: int


class RunObject(Listed):
    model_config = ConfigDict(protected_namespaces=())

    object: Literal["eval.run"] = "eval.run"
    eval_id: str
    name: str
    created_at: int
    status: str
    model: str | None
    data_source: CompletionsSource | JsonlSource
    error: ApiError | None = None
    metadata: Metadata | None = None
    result_counts: ResultCounts
    per_testing_criteria_results: list[CriterionCountsOut]
    per_model_usage: list[ModelUsage]
    report_url: str = Field(description="the run's page in the admin UI: each item, graded")


class RunDeleted(BaseModel):
    object: Literal["eval.run.deleted"] = "eval.run.deleted"
    deleted: bool = True
    run_id: str


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cached_tokens: int = 0


class SampleOut(BaseModel):
    input: list[dict[str, str]]
    output: list[dict[str, str]]
    finish_reason: str
    model: str
    usage: Usage
    error: ApiError | None
    seed: int | None
    temperature: float
    top_p: float
    max_completion_tokens: int


class ResultOut(BaseModel):
    name: str
    type: str
    score: float
    passed: bool
    error: str | None = None
    explanation: str | None = None


class OutputItem(Listed):
    object: Literal["eval.run.output_item"] = "eval.run.output_item"
    eval_id: str
    run_id: str
    created_at: int
    status: str
    datasource_item_id: int
    datasource_item: dict[str, Any]
    results: list[ResultOut]
    sample: SampleOut


class RunSourceDraft(BaseModel):
    """A run's `data_source` for one of the suite's prompts: add `model` and send it."""

    type: Literal["completions"] = "completions"
    source: FileId
    input_messages: TemplateMessages


class UnmappedAssert(BaseModel):
    test: int = Field(description="the test's number in the file, from 1")
    type: str = Field(description="the assert's type, as the file names it")
    why: str


class PromptfooImport(BaseModel):
    """What `POST /v1/evals/promptfoo` made: the eval, the file of its items, a run's data
    source per prompt, and each assert that has no grader here."""

    object: Literal["eval.import"] = "eval.import"
    eval: EvalObject
    file: FileObject
    data_sources: list[RunSourceDraft]
    unmapped: list[UnmappedAssert]
