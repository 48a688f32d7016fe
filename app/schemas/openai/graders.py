"""/v1/fine_tuning/alpha/graders: OpenAI's request and response shapes."""

from dataclasses import asdict
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.graders.results import Grade, GradeErrors
from app.graders.spec import Grader

MAX_SAMPLE = 1_000_000  # characters of a model sample


class GraderValidateCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    grader: Grader


class GraderValidated(BaseModel):
    grader: Grader


class GraderRunCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    grader: Grader
    model_sample: str = Field(
        max_length=MAX_SAMPLE,
        description="the answer to grade: {{sample.output_text}}, and {{sample.output_json}} "
        "when it is JSON",
    )
    item: Any = Field(default=None, description="the dataset row: {{item.*}}")


class RunErrors(BaseModel):
    """OpenAI's error flags: the reward is 0 where one is set."""

    model_config = ConfigDict(protected_namespaces=())

    formula_parse_error: bool
    invalid_variable_error: bool
    model_grader_parse_error: bool
    model_grader_refusal_error: bool
    model_grader_server_error: bool
    model_grader_server_error_details: str | None
    other_error: bool
    python_grader_runtime_error: bool
    python_grader_runtime_error_details: str | None
    python_grader_server_error: bool
    python_grader_server_error_type: str | None
    sample_parse_error: bool
    truncated_observation_error: bool
    unresponsive_reward_error: bool

    @classmethod
    def of(cls, errors: GradeErrors) -> "RunErrors":
        return cls(**asdict(errors))


class RunMetadata(BaseModel):
    errors: RunErrors
    execution_time: float
    name: str
    sampled_model_name: str | None = None
    scores: dict[str, Any]
    token_usage: int | None
    type: str
    explanation: str | None = Field(
        default=None, description="qatune: what the judge said, or why the reward is 0"
    )


class GraderRun(BaseModel):
    model_config = ConfigDict(protected_namespaces=())

    metadata: RunMetadata
    model_grader_token_usage_per_model: dict[str, Any]
    reward: float
    sub_rewards: dict[str, Any]

    @classmethod
    def of(cls, grade: Grade) -> "GraderRun":
        usage = grade.tokens_per_model
        metadata = RunMetadata(
            errors=RunErrors.of(grade.errors),
            execution_time=grade.seconds,
            name=grade.name,
            scores=grade.scores,
            token_usage=sum(usage.values()) if usage else None,
            type=grade.type,
            explanation=grade.explanation,
        )
        return cls(
            metadata=metadata,
            model_grader_token_usage_per_model=dict(usage),
            reward=grade.reward,
            sub_rewards=grade.sub_rewards,
        )
