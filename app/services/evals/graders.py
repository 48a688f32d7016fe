"""Graders for a user: checked against what this service has, and given their tools.

`prepare` does what needs the database (off the event loop): it refuses what spec.py
could not see alone (a python grader while they are off, the cosine metric, a judge model
the user cannot use) with a 400 naming the field, and resolves each judge model once, so
grading itself touches no session. `run` grades one sample, as /v1/fine_tuning/alpha/
graders/run does; evals and reinforcement jobs grade many with the same `Tools`.
"""

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.errors import BadRequest, NotFoundError, QatuneError
from app.core.language import tr
from app.db.models import User
from app.graders.grading import grade
from app.graders.results import Grade, Sample
from app.graders.sandbox.runner import PythonSandbox, SandboxLimits
from app.graders.spec import (
    AnyGrader,
    LabelModel,
    Multi,
    Python,
    SamplingParams,
    ScoreModel,
    TextSimilarity,
)
from app.graders.tools import JudgeAnswer, JudgeFailed, JudgeSampling, Message, Tools
from app.ml.serving.requests import AskFailed
from app.ml.training.judges import JudgeModel
from app.services.serving.queries import Chat, Options, ServedModel, Serving


@dataclass(frozen=True)
class ServingJudge:
    """Judge models resolved for one user, asked through the serving engine."""

    serving: Serving
    models: dict[str, ServedModel]  # by the name the grader gives

    async def ask(
        self, model: str, messages: list[Message], sampling: SamplingParams | None
    ) -> JudgeAnswer:
        return await asyncio.to_thread(self._ask, self.models[model], messages, sampling)

    def _ask(
        self, served: ServedModel, messages: list[Message], sampling: SamplingParams | None
    ) -> JudgeAnswer:
        how = JudgeSampling.of(sampling)
        options = Options(
            max_tokens=how.max_tokens, temperature=how.temperature, top_p=how.top_p, seed=how.seed
        )
        try:
            generation = self.serving.start(served, Chat(messages), options)
            (choice,) = generation.answer()
        except (QatuneError, AskFailed) as exc:
            message = exc.message if isinstance(exc, QatuneError) else str(exc)
            raise JudgeFailed(f"the judge {served.name} could not answer: {message}") from exc
        tokens = generation.prompt_tokens + generation.completion_tokens
        return JudgeAnswer(choice.answer, tokens)


def sandbox_limits(settings: Settings) -> SandboxLimits | None:
    """Python graders' limits as configured; None while they are off."""
    if not settings.python_graders:
        return None
    return SandboxLimits(
        cpu_seconds=settings.python_grader_cpu_seconds,
        wall_seconds=settings.python_grader_wall_seconds,
        memory_mb=settings.python_grader_memory_mb,
        disk_mb=settings.python_grader_disk_mb,
        processes=settings.python_grader_processes,
        concurrency=settings.python_grader_concurrency,
        queue_seconds=settings.python_grader_queue_seconds,
        uid=settings.python_grader_uid,
        without=frozenset(filter(None, settings.python_grader_without.split(","))),
    )


class Graders:
    def __init__(self, serving: Serving, sandbox: PythonSandbox | None) -> None:
        self.serving = serving
        self.sandbox = sandbox  # None: python graders are off

    def prepare(self, session: Session, user: User, grader: AnyGrader, field: str) -> Tools:
        """Tools for grading with `grader` (blocking); BadRequest names the field at fault."""
        return self.prepare_all(session, user, [(grader, field)])

    def prepare_all(
        self, session: Session, user: User, graders: Sequence[tuple[AnyGrader, str]]
    ) -> Tools:
        """Tools for several graders at once (an eval's criteria): one judge for all their
        judge models."""
        judges: dict[str, ServedModel] = {}
        for where, part in (found for g, f in graders for found in _parts(g, f)):
            match part:
                case Python() if self.sandbox is None:
                    raise BadRequest(
                        tr(
                            "Python graders are off on this service: an administrator turns "
                            "them on with QATUNE_PYTHON_GRADERS=true"
                        ),
                        param=f"{where}.type",
                    )
                case TextSimilarity(evaluation_metric="cosine"):
                    raise BadRequest(
                        tr(
                            "The cosine metric needs an embedding model, and this service has "
                            "none: use fuzzy_match, bleu, gleu, meteor or a rouge metric"
                        ),
                        param=f"{where}.evaluation_metric",
                    )
                case ScoreModel() | LabelModel() if part.model not in judges:
                    try:
                        judges[part.model] = self.serving.resolve(session, user, part.model)
                    except NotFoundError as exc:
                        raise BadRequest(
                            tr(
                                "The judge model {part_model!r} does not exist or is not "
                                "yours: GET /v1/models lists the models you can use",
                                part_model=part.model[:200],
                            ),
                            param=f"{where}.model",
                        ) from exc
        judge = ServingJudge(self.serving, judges) if judges else None
        sandbox = self.sandbox.for_owner(str(user.id)) if self.sandbox else None
        return Tools(judge=judge, sandbox=sandbox)

    def judges_for(self, session: Session, user: User, grader: AnyGrader) -> list[JudgeModel]:
        """A reinforcement job's grader checked for its owner, and its judges resolved."""
        return self.judge_models(self.prepare(session, user, grader, "grader"))

    @staticmethod
    def judge_models(tools: Tools) -> list[JudgeModel]:
        """The judges `prepare` resolved, as a training process asks them (JudgeModel)."""
        if not isinstance(tools.judge, ServingJudge):
            return []
        return [
            JudgeModel(name, s.base_model, s.adapter, s.system_prompt, s.quantization)
            for name, s in tools.judge.models.items()
        ]

    async def run(self, grader: AnyGrader, tools: Tools, model_sample: str, item: Any) -> Grade:
        return await grade(grader, Sample.of_text(model_sample), item, tools)


def _parts(grader: AnyGrader, field: str) -> list[tuple[str, AnyGrader]]:
    """The grader and, for a multi grader, each of its graders, with where each is."""
    if isinstance(grader, Multi):
        return [(field, grader)] + [
            (f"{field}.graders.{name}", sub) for name, sub in grader.graders.items()
        ]
    return [(field, grader)]
