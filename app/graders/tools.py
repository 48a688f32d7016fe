"""What graders need from the service, as protocols: a judge model and a sandbox.

services/graders.py provides them: the judge asks a model the user may use through the
serving engine; the sandbox runs python graders in a confined child (python_grader.py).
"""

from dataclasses import dataclass
from typing import Any, Protocol

from app.graders.spec import SamplingParams

Message = dict[str, str]  # {"role", "content"}


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
