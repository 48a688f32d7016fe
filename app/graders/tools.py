"""What graders need from the service, as protocols: a judge model and a sandbox.

services/evals/graders.py provides them: the judge asks a model the user may use through the
serving engine; the sandbox runs python graders in a confined child (python_grader.py).
"""

from dataclasses import dataclass
from typing import Any, Protocol

from app.graders.spec import SamplingParams

Message = dict[str, str]  # {"role", "content"}


JUDGE_MAX_TOKENS = 256  # a judge's answer unless its sampling_params say: a score or a label


@dataclass(frozen=True)
class JudgeSampling:
    """How a judge answers: the grader's sampling_params, greedy and short by default."""

    max_tokens: int
    temperature: float
    top_p: float
    seed: int | None

    @classmethod
    def of(cls, params: SamplingParams | None) -> "JudgeSampling":
        params = params or SamplingParams()
        return cls(
            max_tokens=params.max_completions_tokens or JUDGE_MAX_TOKENS,
            temperature=params.temperature if params.temperature is not None else 0.0,
            top_p=params.top_p if params.top_p is not None else 1.0,
            seed=params.seed,
        )


@dataclass(frozen=True)
class JudgeAnswer:
    text: str
    tokens: int  # prompt and answer


class JudgeFailed(Exception):
    """The judge could not answer (gone, overloaded, failed): a server error, score 0."""


class Judge(Protocol):
    async def ask(
        self, model: str, messages: list[Message], sampling: SamplingParams | None
    ) -> JudgeAnswer: ...


@dataclass(frozen=True)
class SandboxOutcome:
    """A python grader's call: its value, or why it has none."""

    value: float | None = None
    error: str | None = None  # the grader's own fault: an exception, a limit, a bad value
    server_error: str | None = None  # the sandbox could not run it


class Sandbox(Protocol):
    async def run(self, source: str, sample: dict[str, Any], item: Any) -> SandboxOutcome: ...


@dataclass(frozen=True)
class Tools:
    judge: Judge | None = None
    sandbox: Sandbox | None = None
