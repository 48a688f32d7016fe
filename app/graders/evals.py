"""What an eval is made of, as OpenAI's Evals API writes it: testing criteria (graders with
a pass rule), the data a run reads, and what a run counts.

Stored as typed JSON in the evals tables and taken as is by /v1/evals.
"""

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    field_validator,
)

from app.core.language import Sentence
from app.graders import templates
from app.graders.results import Grade
from app.graders.spec import (
    JudgeMessage,
    LabelModel,
    Python,
    ScoreModel,
    StringCheck,
    SubGrader,
    TextSimilarity,
    refuse_reasoning,
    template_strings,
)

MAX_INLINE_ITEMS = 10_000

Criterion = SubGrader  # string_check, text_similarity, python, score_model, label_model


def passed(criterion: Criterion, grade: Grade) -> bool:
    """OpenAI's pass rules: a string check or a label passes at 1; a similarity at its
    threshold; a score at its threshold, else the middle of its range (python: 0.5)."""
    match criterion:
        case StringCheck() | LabelModel():
            return grade.reward >= 1.0
        case TextSimilarity() | Python():
            return grade.reward >= (
                criterion.pass_threshold if criterion.pass_threshold is not None else 0.5
            )
        case ScoreModel():
            low, high = criterion.bounds
            threshold = criterion.pass_threshold
            return grade.reward >= (threshold if threshold is not None else (low + high) / 2)


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CustomDataSourceConfig(_Shape):
    """The items' JSON Schema; `include_sample_schema`: runs sample a model."""

    type: Literal["custom"]
    item_schema: dict[str, Any] = Field(default_factory=dict)
    include_sample_schema: StrictBool = False

    def item_fields(self) -> set[str] | None:
        """The item fields the schema names, or None if it leaves them open."""
        properties = self.item_schema.get("properties")
        if not isinstance(properties, dict) or self.item_schema.get("additionalProperties"):
            return None
        return set(properties)

    def required_fields(self) -> list[str]:
        required = self.item_schema.get("required", [])
        return [str(name) for name in required] if isinstance(required, list) else []

    def optional_fields(self) -> frozenset[str]:
        """The fields the schema names and does not require: a criterion that reads one
        does not grade an item that leaves it out (`optional_reads`)."""
        return frozenset((self.item_fields() or set()) - set(self.required_fields()))


def optional_reads(criterion: Criterion, optional: frozenset[str]) -> frozenset[str]:
    """The fields the item schema makes optional that `criterion` reads: an item that
    leaves one out is not graded by it (a check only some items carry, such as one
    Promptfoo test's assert), neither passed nor failed. A required field an item lacks is
    still the grader's invalid-variable error, as OpenAI's. Read once per run, not per item."""
    read = {
        variable.path[0]
        for text in template_strings(criterion)
        for variable in templates.variables(text)
        if variable.namespace == "item" and variable.path
    }
    return optional.intersection(read)


class Row(_Shape):
    item: dict[str, Any]
    sample: dict[str, Any] | None = None


class FileContent(_Shape):
    type: Literal["file_content"]
    content: list[Row] = Field(min_length=1, max_length=MAX_INLINE_ITEMS)


class FileId(_Shape):
    type: Literal["file_id"]
    id: str = Field(min_length=1, max_length=64)


Source = Annotated[FileContent | FileId, Field(discriminator="type")]


class TemplateMessages(_Shape):
    type: Literal["template"]
    template: list[JudgeMessage] = Field(min_length=1, max_length=64)


class ItemReference(_Shape):
    """The messages are in the item, at this path (`item.messages`)."""

    type: Literal["item_reference"]
    item_reference: str = Field(min_length=1, max_length=200)

    @field_validator("item_reference")
    @classmethod
    def _a_path(cls, value: str) -> str:
        templates.variables("{{" + value + "}}")
        return value


class RunSampling(_Shape):
    temperature: Annotated[StrictFloat, Field(ge=0, le=2)] | None = None
    top_p: Annotated[StrictFloat, Field(gt=0, le=1)] | None = None
    seed: StrictInt | None = None
    max_completion_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    max_completions_tokens: Annotated[StrictInt, Field(ge=1)] | None = None  # graders spell it so
    reasoning_effort: str | None = None

    _no_reasoning = field_validator("reasoning_effort")(refuse_reasoning)

    @property
    def max_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_completions_tokens


class CompletionsSource(_Shape):
    """Sample `model` on each item's messages, then grade its answers."""

    type: Literal["completions"]
    source: Source
    model: str = Field(min_length=1, max_length=600)
    input_messages: TemplateMessages | ItemReference = Field(discriminator="type")
    sampling_params: RunSampling | None = None


class JsonlSource(_Shape):
    """Grade answers that are in the data already (`sample.output_text` of each row)."""

    type: Literal["jsonl"]
    source: Source


RunDataSource = Annotated[CompletionsSource | JsonlSource, Field(discriminator="type")]


class CriterionCounts(BaseModel):
    testing_criteria: str
    passed: int = 0
    failed: int = 0


class ModelUsage(BaseModel):
    model_name: str
    invocation_count: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0


class RunCounts(BaseModel):
    """What a run has found so far."""

    total: int = 0
    passed: int = 0
    failed: int = 0
    errored: int = 0
    per_criterion: list[CriterionCounts] = Field(default_factory=list)
    per_model: list[ModelUsage] = Field(default_factory=list)


class CriterionResult(BaseModel):
    """One criterion's verdict on one item (OpenAI's output item `results`)."""

    name: str
    type: str
    score: float
    passed: bool
    error: str | None = None  # why the score is 0, when a grader failed
    explanation: str | None = None


class SampleRecord(BaseModel):
    """What the model was asked and answered for one item (OpenAI's output item `sample`)."""

    input: list[dict[str, str]] = Field(default_factory=list)
    output: list[dict[str, str]] = Field(default_factory=list)
    finish_reason: str = ""
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seed: StrictInt | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    max_completion_tokens: int = 0
    # Why the model was not asked or did not answer, read in the reader's language (a
    # string: stored before sentences were kept)
    error: Sentence | str | None = None

    @property
    def output_text(self) -> str:
        return "".join(message.get("content", "") for message in self.output)
