"""Judge models of a reinforcement job's score_model and label_model graders, answering in
the training process.

The service resolved each judge for the job's owner when the job was made (the name they
gave, its base and adapter files); here each base gets an engine of its own (query
service), and the judge answers as it is served: its adapter on that base, the system
prompt of its training data, greedy unless the grader's sampling_params say. A judge that
cannot answer (its files deleted since, out of memory) fails the job with that reason: its
scores would be zeros that teach nothing.
"""

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.graders.spec import SamplingParams
from app.graders.tools import JudgeAnswer, JudgeFailed, JudgeSampling, Message
from app.ml.serving.asking import Row, ask, chat_ids, token_budget
from app.ml.serving.requests import AdapterRef, AskFailed, Sampling

if TYPE_CHECKING:
    from app.ml.query_service import QueryService

JUDGE_SECONDS = 600.0  # one judge's answer, at most
STALL_SECONDS = 300.0  # ...and no token for this long ends it: the job fails, saying so


@dataclass(frozen=True)
class JudgeModel:
    name: str  # as the grader names it
    base_model: str
    adapter: AdapterRef | None  # None: the base model itself
    system_prompt: str | None = None  # its training data's, if any
    quantization: str = "none"  # the base's weights it was trained on


class LocalJudge:
    def __init__(self, models: tuple[JudgeModel, ...], service: "QueryService") -> None:
        self.models = {model.name: model for model in models}
        self.service = service

    async def ask(
        self, model: str, messages: list[Message], sampling: SamplingParams | None
    ) -> JudgeAnswer:
        judge = self.models.get(model)
        if judge is None:
            raise JudgeFailed(f"the judge {model!r} was not resolved for this job")
        return await asyncio.to_thread(self._ask, judge, messages, JudgeSampling.of(sampling))

    def _ask(self, judge: JudgeModel, messages: list[Message], how: JudgeSampling) -> JudgeAnswer:
        try:
            engine = self.service.engine(judge.base_model, judge.quantization)
            prompt = chat_ids(engine.tokenizer, messages, system_prompt=judge.system_prompt)
            budget = token_budget(
                model=judge.base_model,
                context=engine.context,
                prompt_tokens=len(prompt),
                asked=how.max_tokens,
                default=None,
            )
            sampling = Sampling(budget, how.temperature, how.top_p, seed=how.seed)
            generation = ask(
                engine,
                [Row(prompt, judge.adapter, sampling)],
                seconds=JUDGE_SECONDS,
                stall_seconds=STALL_SECONDS,
            )
            (choice,) = generation.answer()
        except AskFailed as exc:
            raise JudgeFailed(f"the judge {judge.name} could not answer: {exc}") from exc
        assert choice.finished is not None
        finished = choice.finished
        return JudgeAnswer(choice.answer, finished.prompt_tokens + finished.completion_tokens)
