"""A reinforcement job's rewards: its grader (app/graders, OpenAI's grader JSON) scoring
sampled answers, in the training process.

All of a step's answers are graded together (python graders in their sandbox, at most its
concurrency at once; judge models through their engine, batched). An answer the grader
cannot score (a missing item field, a judge's unreadable answer, a python grader that
raises) gets 0, as OpenAI's graders give it, and is counted; a judge that cannot answer at
all or a sandbox that cannot run fails the job with that reason.
"""

import asyncio
from dataclasses import dataclass
from typing import Any

from app.core.language import said
from app.graders.grading import grade
from app.graders.results import Grade, Sample
from app.graders.spec import AnyGrader
from app.graders.tools import Tools
from app.ml.training.stops import TrainingFailed

STALL_SECONDS = 600.0  # no answer of a step graded for this long: the job fails, saying so


@dataclass(frozen=True)
class Scored:
    rewards: list[float]
    errors: int  # answers the grader could not score (their reward is 0)
    first_error: str | None  # one of those, to say why


class Rewards:
    def __init__(self, grader: AnyGrader, tools: Tools) -> None:
        self.grader = grader
        self.tools = tools

    def score(self, answers: list[str], items: list[dict[str, Any]]) -> Scored:
        grades = asyncio.run(self._grade_all(answers, items))
        broken = [g for g in grades if _server_fault(g)]
        if broken:  # zeros that are nobody's answer's fault would teach the wrong thing
            raise TrainingFailed(said("Grading failed: {why}", why=str(_why(broken[0]))))
        failed = [g for g in grades if g.errors.any]
        return Scored(
            rewards=[g.reward for g in grades],
            errors=len(failed),
            first_error=_why(failed[0]) if failed else None,
        )

    async def _grade_all(self, answers: list[str], items: list[dict[str, Any]]) -> list[Grade]:
        """Every answer's grade. Each runs to its end, even when another raises (cancelling
        them midway once left a job stuck); no grade ending for STALL_SECONDS fails the
        step, the grades still running cancelled (their sandboxes killed)."""
        tasks = [
            asyncio.ensure_future(grade(self.grader, Sample.of_text(answer), item, self.tools))
            for answer, item in zip(answers, items, strict=True)
        ]
        try:
            pending: set[asyncio.Future[Grade]] = set(tasks)
            while pending:
                done, pending = await asyncio.wait(pending, timeout=STALL_SECONDS)
                if not done:
                    raise TrainingFailed(
                        said(
                            "Grading made no progress: no answer was graded for {seconds:g} s "
                            "({left} of {total} still waiting)",
                            seconds=STALL_SECONDS,
                            left=len(pending),
                            total=len(tasks),
                        )
                    )
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for task in tasks:
            if (error := task.exception()) is not None:
                raise TrainingFailed(
                    said("Grading failed: {why}", why=f"{type(error).__name__}: {error}")
                ) from error
        return [task.result() for task in tasks]


def _server_fault(grade: Grade) -> bool:
    """A judge that cannot answer or a sandbox that cannot run: not the answer's fault."""
    return grade.errors.model_grader_server_error or grade.errors.python_grader_server_error


def _why(failed: Grade) -> str:
    return failed.explanation or "the grader could not score an answer"
