"""Serving: which model a name is for a user, the models on offer, deleting one, and asking.

One object for the native query, both /v1 completion routes, the playground (through
/v1) and `qatune ask`, in the spirit of vLLM's OpenAIServingModels and OpenAIServingChat:
the routes translate shapes, everything else is decided here once: the model a name
answers with (a name that lists is a name that answers; another user's model is not
found), the system prompt an adapter was trained with, the token budget and the room in
the context, asked through the one way into an engine (app/ml/serving/asking.py).
"""

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Literal

import anyio.to_thread
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.errors import BadRequest, ForbiddenError, NotFoundError
from app.core.language import tr
from app.core.storage import Storage
from app.db.models import Job, User
from app.jobs.status import has_model
from app.ml.builtin import BUILTIN_DESCRIPTION, BUILTIN_TINY, is_builtin
from app.ml.models import cached_hub_models
from app.ml.packaged import PACKAGED, installed, is_packaged
from app.ml.query_service import QueryService
from app.ml.serving.asking import (
    ChatNotRendered,
    Choice,
    EngineEvent,
    Finished,
    Generation,
    NoRoom,
    Row,
    TextDelta,
    ask,
    chat_ids,
    question_ids,
    token_budget,
)
from app.ml.serving.requests import AdapterRef, FinishReason, Sampling
from app.ml.training.adapter_metadata import answer_budget, read_adapter_metadata
from app.services import openai_ids
from app.services.exports.exporter import Exporter
from app.services.jobs import lifecycle as jobs_service
from app.services.jobs import trained_models
from app.services.serving.tool_use import ToolUse, tool_use_for

Message = dict[str, Any]  # {"role", "content", …}, as a chat template takes it


@dataclass(frozen=True)
class ServedModel:
    name: str  # as the caller named it
    base_model: str
    adapter: AdapterRef | None  # None: the base model itself
    system_prompt: str | None  # the one the adapter was trained with, if any
    answer_budget: int  # tokens an answer gets unless the caller says (answer_budget)
    job: Job | None = None  # the job that trained it
    checkpoint_step: int | None = None  # one of the job's checkpoints, not its final model
    # The base's weights it was trained on (none, 8bit, 4bit): it is served on the same
    quantization: str = "none"
    # Whose questions these are (a user's id): the engine's waiting line takes a turn per
    # caller, so one user's burst does not hold another's question back
    caller: int | None = None

    def bare(self) -> "ServedModel":
        """Its base model alone, with the same budget (to compare answers)."""
        return replace(self, name=self.base_model, adapter=None, system_prompt=None)


@dataclass(frozen=True)
class Chat:
    messages: list[Message]
    tools: list[dict[str, Any]] | None = None  # OpenAI's function tools, offered to the model


@dataclass(frozen=True)
class Text:
    prompts: list[str]


@dataclass(frozen=True)
class Options:
    """How to answer; `max_tokens` None: the default of `budget`."""

    max_tokens: int | None = None
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False
    n: int = 1  # answers to each prompt
    # Without max_tokens: room for the adapter's own answers ("trained", the native API), or
    # the rest of the context ("context", OpenAI's).
    budget: Literal["trained", "context"] = "trained"


@dataclass(frozen=True)
class BaseOffer:
    name: str
    # builtin: made by qatune (builtin:tiny); packaged: installed from the package registry
    # (smollm2-135m-instruct); configured: QATUNE_BASE_MODELS (or the default); cached: a
    # hub model downloaded here
    kind: Literal["builtin", "packaged", "configured", "cached"]
    description: str


@dataclass(frozen=True)
class Answer:
    text: str
    seconds: float  # the model's loading included, the first time
    finish_reason: FinishReason


def _asked(question: str) -> Chat:
    return Chat([{"role": "user", "content": question}])


def _answer(choice: Choice, started: float) -> Answer:
    assert choice.finished is not None
    seconds = round(time.perf_counter() - started, 3)
    return Answer(choice.answer, seconds, choice.finished.reason)


def _offer(name: str) -> BaseOffer:
    if is_builtin(name):
        return BaseOffer(name, "builtin", BUILTIN_DESCRIPTION)
    if is_packaged(name):
        return BaseOffer(name, "packaged", PACKAGED[name].description)
    return BaseOffer(name, "configured", "")


class Serving:
    def __init__(
        self, *, settings: Settings, storage: Storage, engines: QueryService, exporter: Exporter
    ) -> None:
        self.settings = settings
        self.storage = storage
        self.engines = engines
        self.exporter = exporter

    # -------------------------------------------------------------------- models
    def base_models(self) -> list[str]:
        """The base models on offer: the default first, the packaged ones installed here,
        the built-in one, the configured ones."""
        settings = self.settings
        packaged = [name for name in PACKAGED if installed(name)]
        names = [settings.default_base_model, *packaged, BUILTIN_TINY, *settings.base_models]
        return list(dict.fromkeys(names))

    def offers(self) -> list[BaseOffer]:
        """The base models on offer, then those downloaded here (no hub needed for them)."""
        names = self.base_models()
        offered = [_offer(name) for name in names]
        cached = [name for name in cached_hub_models() if name not in names]
        return offered + [BaseOffer(name, "cached", "downloaded here") for name in cached]

    def trained_models(self, session: Session, user: User) -> list[Job]:
        """The user's jobs whose model can be asked, newest first."""
        return jobs_service.jobs_with_models(session, user=user)

    def resolve(self, session: Session, user: User, name: str) -> ServedModel:
        """What `name` answers with; NotFoundError if it is not a model this user can ask."""
        if name in self.base_models() or jobs_service.has_model_on(
            session, user=user, base_model=name
        ):  # a base on offer, or the base of a model of theirs (the playground compares them)
            return ServedModel(name, name, None, None, answer_budget(None), caller=user.id)
        job, step = self._trained(session, user, name)
        if step is None and not has_model(job):
            raise NotFoundError(
                tr("The model {name!r} was deleted or has not finished", name=name[:200])
            )
        return replace(self.job_model(job, checkpoint_step=step, name=name), caller=user.id)

    def job_model(
        self, job: Job, *, checkpoint_step: int | None = None, name: str | None = None
    ) -> ServedModel:
        """A job's trained model, or one of its checkpoints (NotFound, Conflict: why not),
        asked as its owner."""
        key, directory = trained_models.servable_adapter(
            self.storage, job, checkpoint_step=checkpoint_step
        )
        metadata = read_adapter_metadata(directory)  # AdapterInvalid: a 409
        model_name = name or (
            openai_ids.model_id(job)
            if checkpoint_step is None
            else openai_ids.checkpoint_model_id(job, checkpoint_step)
        )
        return ServedModel(
            model_name,
            job.base_model,
            AdapterRef(key, directory),
            metadata.system_prompt,
            answer_budget(metadata),
            job,
            checkpoint_step,
            metadata.quantization,
            caller=job.owner_id,
        )

    @staticmethod
    def adapter_model(directory: Path, key: str = "local") -> ServedModel:
        """An adapter directory of one's own (`qatune ask`)."""
        metadata = read_adapter_metadata(directory)
        return ServedModel(
            str(directory),
            metadata.base_model,
            AdapterRef(key, directory),
            metadata.system_prompt,
            answer_budget(metadata),
            quantization=metadata.quantization,
        )

    def delete_model(self, session: Session, user: User, name: str) -> Job:
        """A fine-tuned model: its adapter, checkpoints and exports go; its job stays."""
        if name in self.base_models():
            raise ForbiddenError(
                tr("{name!r} is a base model; only fine-tuned models can be deleted", name=name)
            )
        job, step = self._trained(session, user, name)
        if step is not None:
            raise BadRequest(
                tr(
                    "That is a checkpoint of a model; delete the model itself ({model}), which "
                    "removes its checkpoints too",
                    model=openai_ids.model_id(job),
                ),
                param="model",
            )
        jobs_service.delete_model(session, user=user, storage=self.storage, job_id=job.id)
        self.forget(job)
        return job

    def delete_job(self, session: Session, user: User, job_id: int) -> None:
        """A job, its files and its model everywhere it is served or exported."""
        self.forget(
            jobs_service.delete_job(session, user=user, storage=self.storage, job_id=job_id)
        )

    def preload(self, served: ServedModel) -> None:
        """A newly trained model's adapter, into the vLLM servers of its base now rather
        than on its first request (QATUNE_VLLM_LOAD=at_once); blocking, and a failure is
        logged only: the first request tries again."""
        from loguru import logger

        from app.ml.serving.vllm_engine import VllmEngine

        try:
            engine = self.engines.engine(served.base_model, served.quantization)
            if isinstance(engine, VllmEngine) and served.adapter is not None:
                engine.preload(served.adapter)
        except Exception as exc:  # noqa: BLE001  (said in the log; asking says it again)
            logger.warning("{} not loaded into vLLM at once: {}", served.name, exc)

    def forget(self, job: Job) -> None:
        self.engines.forget_adapter(job.storage_key)
        self.exporter.forget(job.storage_key)

    def _trained(self, session: Session, user: User, name: str) -> tuple[Job, int | None]:
        """The job (and checkpoint step) an `ft:` name is, if it is exactly one of the
        user's; NotFoundError otherwise, saying where the names are."""
        ref = openai_ids.parse_model_id(name)
        job = None
        if ref is not None:
            try:
                job = jobs_service.get_job(session, user=user, job_id=ref.job_id)
            except NotFoundError:
                pass
        if ref is None or job is None or not ref.matches(job, name):
            raise NotFoundError(
                tr(
                    "The model {name!r} does not exist or is not yours; GET /v1/models lists "
                    "the ones you can use",
                    name=name[:200],
                )
            )
        return job, ref.checkpoint_step

    # -------------------------------------------------------------------- asking
    def start(
        self,
        served: ServedModel,
        prompt: Chat | Text,
        options: Options,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> Generation:
        """Submit one request a choice (blocking: the model may load; call it off the event
        loop). `loop`: the events go to that loop's `Generation.batches`, else `answer`."""
        engine = self.engines.engine(served.base_model, served.quantization)
        question = self._question_ids(engine.tokenizer, served, prompt)
        rendered = self._render(engine.tokenizer, served, prompt)
        # The system prompt the adapter was trained with is the adapter's own: a question its
        # scope gives the base is asked as the caller wrote it, as the base knew it.
        bare: list[list[int] | None] = [None] * len(rendered)
        if question and served.system_prompt:
            bare = list(self._render(engine.tokenizer, served.bare(), prompt))
        rows = [
            Row(ids, served.adapter, self._sampling(served, engine.context, ids, options, index),
                question_ids=question, base_prompt_ids=bare_ids)
            for index, (ids, bare_ids) in enumerate(
                pair for pair in zip(rendered, bare, strict=True) for _ in range(options.n)
            )
        ]  # fmt: skip
        return ask(
            engine,
            rows,
            seconds=self.engines.timeout_seconds,
            n=options.n,
            loop=loop,
            send_every=self.settings.serve_stream_interval_ms / 1000,
            caller=served.caller,
        )

    def tool_use(self, served: ServedModel, prompt: Chat | Text) -> ToolUse | None:
        """How the model writes the calls of the tools a chat offers (a 400 if it writes
        none); None when no tools are offered."""
        if not isinstance(prompt, Chat) or not prompt.tools:
            return None
        engine = self.engines.engine(served.base_model, served.quantization)
        return tool_use_for(engine.tokenizer, served.base_model, prompt.tools)

    def answer(self, served: ServedModel, question: str, options: Options) -> Answer:
        """One question's whole answer, waiting for it (blocking: `qatune ask`)."""
        started = time.perf_counter()
        generation = self.start(served, _asked(question), options)
        (choice,) = generation.answer()
        return _answer(choice, started)

    async def ask(
        self,
        served: ServedModel,
        question: str,
        options: Options,
        disconnected: Callable[[], Awaitable[bool]],
    ) -> Answer | None:
        """`answer`, from the event loop: the model is loaded and the question submitted in
        a worker thread, the answer awaited on the loop, so that no thread waits for it;
        None if the caller went away (the question is cancelled)."""
        started = time.perf_counter()
        loop = asyncio.get_running_loop()
        start = partial(self.start, served, _asked(question), options, loop=loop)
        generation = await anyio.to_thread.run_sync(start)
        async for _ in generation.batches(disconnected):
            pass
        generation.raise_if_failed()
        (choice,) = generation.choices
        return _answer(choice, started) if choice.finished is not None else None

    @staticmethod
    def _question_ids(tokenizer: Any, served: ServedModel, prompt: Chat | Text) -> list[int] | None:
        """A chat's last question alone, for the adapter's scope (scope.py); a completion's
        prompt is not a question of the trained form: the adapter answers it."""
        if served.adapter is None or not isinstance(prompt, Chat):
            return None
        asked = [m for m in prompt.messages if m.get("role") == "user"]
        content = asked[-1].get("content") if asked else None
        return question_ids(tokenizer, content) if isinstance(content, str) else None

    def _render(self, tokenizer: Any, served: ServedModel, prompt: Chat | Text) -> list[list[int]]:
        if isinstance(prompt, Chat):
            try:
                ids = chat_ids(
                    tokenizer, prompt.messages, system_prompt=served.system_prompt,
                    tools=prompt.tools,
                )  # fmt: skip
            except ChatNotRendered as exc:
                raise BadRequest(str(exc), param="messages") from exc
            return [ids]
        prompts = [list(tokenizer(text).input_ids) for text in prompt.prompts]
        if any(not ids for ids in prompts):
            raise BadRequest(
                tr("A prompt is empty; send some text to continue"),
                param="prompt",
            )
        return prompts

    @staticmethod
    def _sampling(
        served: ServedModel, context: int, ids: list[int], options: Options, index: int
    ) -> Sampling:
        """How choice `index` is sampled: the tokens asked if they fit the context's room,
        else the default of `options.budget`; a prompt with no room is a 400."""
        default = served.answer_budget if options.budget == "trained" else None
        try:
            max_tokens = token_budget(
                model=served.base_model,
                context=context,
                prompt_tokens=len(ids),
                asked=options.max_tokens,
                default=default,
            )
        except NoRoom as exc:
            raise BadRequest(str(exc), param="max_tokens" if exc.asked else "messages") from exc
        return Sampling(
            max_tokens=max_tokens,
            temperature=options.temperature,
            top_p=options.top_p,
            seed=options.seed + index if options.seed is not None else None,
            stop=options.stop,
            ignore_eos=options.ignore_eos,
        )


# What the routes read of an answer as it comes (they take nothing from app.ml directly).
__all__ = [
    "Answer",
    "Chat",
    "Choice",
    "EngineEvent",
    "Finished",
    "Generation",
    "Options",
    "ServedModel",
    "Serving",
    "Text",
    "TextDelta",
]
