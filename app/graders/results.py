"""What grading gives back: a reward, the graders' own scores, and what went wrong.

The error flags are OpenAI's (a grader run's `metadata.errors`): a grader that fails on
one sample scores 0 with a flag, it never fails the whole run.
"""

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from app.core.json_text import parse_json


@dataclass(frozen=True)
class Sample:
    """A model's answer as graders see it: `{{ sample.output_text }}` and the rest."""

    output_text: str
    output_json: Any = None  # the answer parsed, when it is a JSON object or list
    output_tools: list[Any] = field(default_factory=list)
    choices: list[Any] = field(default_factory=list)

    @classmethod
    def of_text(cls, text: str) -> "Sample":
        try:
            parsed = parse_json(text)
        except ValueError:
            parsed = None
        return cls(text, parsed if isinstance(parsed, dict | list) else None)

    def namespace(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class GradeErrors:
    formula_parse_error: bool = False
    invalid_variable_error: bool = False
    model_grader_parse_error: bool = False
    model_grader_refusal_error: bool = False
    model_grader_server_error: bool = False
    model_grader_server_error_details: str | None = None
    other_error: bool = False
    python_grader_runtime_error: bool = False
    python_grader_runtime_error_details: str | None = None
    python_grader_server_error: bool = False
    python_grader_server_error_type: str | None = None
    sample_parse_error: bool = False
    truncated_observation_error: bool = False
    unresponsive_reward_error: bool = False

    @property
    def any(self) -> bool:
        return any(getattr(self, f.name) is True for f in fields(self))

    def absorb(self, other: "GradeErrors") -> None:
        """A multi grader's errors are those of its graders, together."""
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if isinstance(mine, bool):
                setattr(self, f.name, mine or theirs)
            elif mine is None:
                setattr(self, f.name, theirs)


@dataclass
class Grade:
    name: str
    type: str
    reward: float
    errors: GradeErrors = field(default_factory=GradeErrors)
    scores: dict[str, float] = field(default_factory=dict)  # a multi grader's: each grader's
    sub_rewards: dict[str, float] = field(default_factory=dict)
    tokens_per_model: dict[str, int] = field(default_factory=dict)  # judge models' usage
    explanation: str | None = None  # what the judge said, or why it scored 0
    seconds: float = 0.0

    @classmethod
    def failed(cls, name: str, kind: str, errors: GradeErrors, why: str) -> "Grade":
        return cls(name, kind, 0.0, errors, explanation=why)
