"""Graders as OpenAI's JSON writes them, checked on arrival.

What a grader can be checked for alone is checked here (fields, templates, the formula);
what needs the service (the judge model exists, python graders are on) in
services/evals/graders.py. A field OpenAI does not have is refused, as OpenAI refuses it.
"""

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from app.core.language import tr
from app.graders import templates
from app.graders.formula import Formula, FormulaError
from app.graders.text_similarity import Metric

MAX_SOURCE = 256 * 1024  # characters of a python grader, as OpenAI allows
MAX_TEMPLATE = 100_000  # characters of any one string that may hold templates

Template = Annotated[str, Field(max_length=MAX_TEMPLATE)]


def refuse_reasoning(value: str | None) -> str | None:
    """reasoning_effort: qatune serves no reasoning model, so only none is accepted."""
    if value not in (None, "none"):
        raise ValueError(
            tr("qatune's models do not reason: leave reasoning_effort out (or 'none')")
        )
    return value


def _checked_template(value: str) -> str:
    templates.variables(value)  # ValueError names the variable written wrong
    return value


class _Grader(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=256, description="the grader's name")


class StringCheck(_Grader):
    """1 if the check holds, else 0. like / ilike: the input contains the reference (ilike
    ignoring case)."""

    type: Literal["string_check"]
    input: Template
    reference: Template
    operation: Literal["eq", "ne", "like", "ilike"]

    check_templates = field_validator("input", "reference")(_checked_template)


class TextSimilarity(_Grader):
    """A similarity between 0 and 1 (text_similarity.py says how each is computed)."""

    type: Literal["text_similarity"]
    input: Template
    reference: Template
    evaluation_metric: Metric
    pass_threshold: StrictFloat | None = Field(default=None, description="evals: pass at or above")

    check_templates = field_validator("input", "reference")(_checked_template)


class InputText(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["input_text", "output_text"]
    text: Template

    check_templates = field_validator("text")(_checked_template)


class JudgeMessage(BaseModel):
    """One message to a judge model; only text: qatune's models read nothing else."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["user", "assistant", "system", "developer"]
    content: Template | InputText | list[InputText]
    type: Literal["message"] | None = None

    @field_validator("content")
    @classmethod
    def check_templates(cls, value: Any) -> Any:
        if isinstance(value, str):
            _checked_template(value)
        return value

    @property
    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        parts = self.content if isinstance(self.content, list) else [self.content]
        return "".join(part.text for part in parts)


class SamplingParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: Annotated[StrictFloat, Field(ge=0, le=2)] | None = None
    top_p: Annotated[StrictFloat, Field(gt=0, le=1)] | None = None
    seed: StrictInt | None = None
    max_completions_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    reasoning_effort: str | None = None

    _no_reasoning = field_validator("reasoning_effort")(refuse_reasoning)


class ScoreModel(_Grader):
    """The judge answers with a number in `range` (default 0 to 1), the reward."""

    type: Literal["score_model"]
    model: str = Field(min_length=1, max_length=512)
    input: list[JudgeMessage] = Field(min_length=1, max_length=64)
    range: tuple[StrictFloat, StrictFloat] | None = None
    sampling_params: SamplingParams | None = None
    pass_threshold: StrictFloat | None = Field(default=None, description="evals: pass at or above")

    @field_validator("range")
    @classmethod
    def _ordered(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and not value[0] < value[1]:
            raise ValueError(
                tr("range must be [low, high] with low < high, not {value}", value=list(value))
            )
        return value

    @property
    def bounds(self) -> tuple[float, float]:
        return self.range or (0.0, 1.0)


class LabelModel(_Grader):
    """The judge answers with one of `labels`; the reward is 1 for a passing label."""

    type: Literal["label_model"]
    model: str = Field(min_length=1, max_length=512)
    input: list[JudgeMessage] = Field(min_length=1, max_length=64)
    labels: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(
        min_length=1, max_length=64
    )
    passing_labels: list[str] = Field(min_length=1, max_length=64)

    @model_validator(mode="after")
    def _passing_are_labels(self) -> "LabelModel":
        if len(set(self.labels)) != len(self.labels):
            raise ValueError(tr("labels must not repeat"))
        if stray := [label for label in self.passing_labels if label not in self.labels]:
            raise ValueError(
                tr(
                    "passing_labels {stray} are not among labels {labels}",
                    stray=stray,
                    labels=self.labels,
                )
            )
        return self


class Python(_Grader):
    """`source` defines grade(sample, item) -> float; it runs sandboxed (python_grader.py)."""

    type: Literal["python"]
    source: str = Field(min_length=1, max_length=MAX_SOURCE)
    image_tag: str | None = Field(default=None, max_length=128)
    pass_threshold: StrictFloat | None = Field(default=None, description="evals: pass at or above")


SubGrader = Annotated[
    StringCheck | TextSimilarity | Python | ScoreModel | LabelModel, Field(discriminator="type")
]


class Multi(_Grader):
    """Named graders, combined by `calculate_output` (formula.py) into one reward."""

    type: Literal["multi"]
    graders: dict[Annotated[str, Field(min_length=1, max_length=64)], SubGrader] = Field(
        min_length=1, max_length=32
    )
    calculate_output: str = Field(min_length=1)

    @field_validator("graders", mode="before")
    @classmethod
    def _one_grader(cls, value: Any) -> Any:
        # OpenAI's generated SDK types `graders` as a single grader: keyed by its own name.
        if isinstance(value, dict) and isinstance(value.get("type"), str):
            return {str(value.get("name", "grader")): value}
        return value

    @field_validator("calculate_output")
    @classmethod
    def _formula_reads_graders(cls, value: str, info: ValidationInfo) -> str:
        if "graders" in info.data:  # else the graders were refused already
            try:
                Formula.parse(value, frozenset(info.data["graders"]))
            except FormulaError as exc:
                raise ValueError(str(exc)) from exc
        return value

    @property
    def formula(self) -> Formula:
        return Formula.parse(self.calculate_output, frozenset(self.graders))


# What /v1/fine_tuning/alpha/graders and reinforcement jobs take (no label_model, as OpenAI).
Grader = Annotated[
    StringCheck | TextSimilarity | Python | ScoreModel | Multi, Field(discriminator="type")
]
AnyGrader = StringCheck | TextSimilarity | Python | ScoreModel | LabelModel | Multi


def template_strings(grader: AnyGrader) -> list[str]:
    """Every string of the grader that holds templates."""
    match grader:
        case StringCheck() | TextSimilarity():
            return [grader.input, grader.reference]
        case ScoreModel() | LabelModel():
            return [message.text for message in grader.input]
        case Multi():
            return [text for sub in grader.graders.values() for text in template_strings(sub)]
        case Python():
            return []
