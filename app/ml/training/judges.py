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
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.graders.spec import SamplingParams
from app.graders.tools import JudgeAnswer, JudgeFailed, JudgeSampling, Message
from app.ml.serving.requests import (
    AdapterRef,
    EngineEvent,
    Finished,
    FinishReason,
    GenerationRequest,
    Sampling,
)
from app.ml.serving.text import answer_text

if TYPE_CHECKING:
    from app.ml.query_service import QueryService

JUDGE_SECONDS = 600.0


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
        from app.ml.data import prompt_ids  # torch: not for the API, which imports JudgeModel

        engine = self.service.engine(judge.base_model, judge.quantization)
        if judge.system_prompt and messages[0]["role"] != "system":
            messages = [{"role": "system", "content": judge.system_prompt}, *messages]
        prompt = prompt_ids(engine.tokenizer, messages)
        done = threading.Event()
        ended: list[Finished] = []

        def take(event: EngineEvent) -> None:
            if isinstance(event, Finished):
                ended.append(event)
                done.set()

        request = GenerationRequest(
            prompt,
            judge.adapter,
            Sampling(how.max_tokens, how.temperature, how.top_p, seed=how.seed),
            take,
            time.monotonic() + JUDGE_SECONDS,
        )
        try:
            engine.submit(request)
        except Exception as exc:
            raise JudgeFailed(f"the judge {judge.name} could not answer: {exc}") from exc
        done.wait()
        finished = ended[0]
        if finished.reason == FinishReason.ERROR:
            raise JudgeFailed(f"the judge {judge.name} could not answer: {finished.error}")
        text = answer_text(engine.tokenizer, request.generated)
        return JudgeAnswer(text, finished.prompt_tokens + finished.completion_tokens)
