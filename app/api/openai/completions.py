"""/v1/chat/completions and /v1/completions, served by the base model's engine.

The route resolves the model and renders the prompt in the thread pool (the database and
the tokenizer stay off the event loop), hands one engine request per choice to the
engine, and waits on an asyncio queue the engine's thread feeds. A client that goes away
cancels its requests, and the engine drops their rows before its next step.
"""

import asyncio
import json
import secrets
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel

from app.api.deps import CurrentUser, RuntimeDep
from app.api.errors import error_response
from app.api.openapi import errors
from app.core.errors import BadRequest, TooManyRequests
from app.db.models import User
from app.ml.serving.requests import (
    EngineEvent,
    Finished,
    FinishReason,
    GenerationRequest,
    PromptTooLong,
    QueueFull,
    Sampling,
    TextDelta,
)
from app.runtime import Runtime
from app.schemas.openai.completions import (
    AssistantMessage,
    ChatChoice,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionCreate,
    ChunkChoice,
    Completion,
    CompletionCreate,
    Delta,
    SamplingFields,
    TextChoice,
    Usage,
)
from app.services.serving import ServedModel, served_model

if TYPE_CHECKING:  # the engine imports torch; the API process loads it on first use
    from app.ml.serving.engine import Engine

router = APIRouter()
STREAMING: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/event-stream": {}}, "description": "with stream: true"}
}


@dataclass
class Prepared:
    """Everything the engine needs, made in the thread pool."""

    served: ServedModel
    engine: "Engine"
    prompts: list[list[int]]  # one per choice


@dataclass(frozen=True)
class Header:
    """What every chunk of one response repeats."""

    id: str
    created: int
    model: str
    n: int


@dataclass
class Choice:
    index: int
    request: GenerationRequest
    text: list[str] = field(default_factory=list)
    finished: Finished | None = None


def _prepare(
    runtime: Runtime,
    user_id: int,
    name: str,
    render: Callable[["Engine", ServedModel], list[list[int]]],
) -> Prepared:
    with runtime.database.session() as session:
        user = session.get(User, user_id)
        assert user is not None
        served = served_model(session, user, runtime.settings, runtime.storage, name)
    engine = runtime.query_service.engine(served.base_model)
    return Prepared(served, engine, render(engine, served))


def _chat_prompt(body: ChatCompletionCreate) -> Callable[["Engine", ServedModel], list[list[int]]]:
    def render(engine: "Engine", served: ServedModel) -> list[list[int]]:
        messages = [
            {"role": "system" if m.role == "developer" else m.role, "content": m.text}
            for m in body.messages
        ]
        if served.system_prompt and messages[0]["role"] != "system":
            messages.insert(0, {"role": "system", "content": served.system_prompt})
        from app.ml.data import prompt_ids

        try:
            ids = prompt_ids(engine.tokenizer, messages)
        except Exception as exc:  # the model's own template refused the conversation
            raise BadRequest(
                f"The model's chat template cannot render these messages: {exc}",
                param="messages",
            ) from exc
        return [ids] * body.n

    return render


def _text_prompt(body: CompletionCreate) -> Callable[["Engine", ServedModel], list[list[int]]]:
    def render(engine: "Engine", served: ServedModel) -> list[list[int]]:
        texts = [body.prompt] if isinstance(body.prompt, str) else body.prompt
        prompts = [list(engine.tokenizer(text).input_ids) for text in texts]
        if any(not ids for ids in prompts):
            raise BadRequest("A prompt is empty; send some text to continue", param="prompt")
        return [ids for ids in prompts for _ in range(body.n)]

    return render


def _refuse_what_is_not_served(body: SamplingFields) -> None:
    if body.tools is not None and body.tools != []:
        raise BadRequest("qatune's models do not call tools; send no 'tools'", param="tools")
    if body.logprobs is not None and body.logprobs is not False:
        raise BadRequest(
            "qatune does not return logprobs; leave 'logprobs' unset", param="logprobs"
        )


def _submit(
    prepared: Prepared,
    body: SamplingFields,
    max_tokens: int | None,
    queue: "asyncio.Queue[tuple[int, EngineEvent]]",
    timeout: float,
) -> list[Choice]:
    loop = asyncio.get_running_loop()
    engine = prepared.engine
    choices: list[Choice] = []
    try:
        for index, ids in enumerate(prepared.prompts):
            room = engine.context - len(ids)
            if room <= 0 or (max_tokens is not None and max_tokens > room):
                raise BadRequest(
                    f"The prompt is {len(ids)} tokens and {prepared.served.base_model} reads "
                    f"{engine.context}: ask for at most {max(room, 0)} new tokens",
                    param="max_tokens",
                )
            sampling = Sampling(
                max_tokens=max_tokens or room,
                temperature=body.temperature if body.temperature is not None else 1.0,
                top_p=body.top_p if body.top_p is not None else 1.0,
                seed=body.seed + index if body.seed is not None else None,
                stop=body.stops,
                ignore_eos=body.ignore_eos,
            )

            def sink(event: EngineEvent, index: int = index) -> None:
                loop.call_soon_threadsafe(queue.put_nowait, (index, event))

            deadline = time.monotonic() + timeout
            request = GenerationRequest(ids, prepared.served.adapter, sampling, sink, deadline)
            engine.submit(request)
            choices.append(Choice(index, request))
    except (QueueFull, PromptTooLong, BadRequest) as exc:
        for choice in choices:
            choice.request.cancel()
        if isinstance(exc, QueueFull):
            raise TooManyRequests(str(exc), retry_after=exc.retry_after) from exc
        if isinstance(exc, PromptTooLong):
            raise BadRequest(str(exc), param="messages") from exc
        raise
    return choices


async def _events(
    choices: list[Choice], queue: "asyncio.Queue[tuple[int, EngineEvent]]", request: Request
) -> AsyncIterator[tuple[Choice, EngineEvent]]:
    """Every choice's events until all have finished; cancels them all if we stop early."""
    left = len(choices)
    try:
        while left:
            try:
                index, event = await asyncio.wait_for(queue.get(), timeout=1.0)
            except TimeoutError:
                if await request.is_disconnected():
                    return
                continue
            choice = choices[index]
            if isinstance(event, Finished):
                choice.finished = event
                left -= 1
            else:
                choice.text.append(event.text)
            yield choice, event
    finally:
        for choice in choices:
            if choice.finished is None:
                choice.request.cancel()


def _usage(choices: list[Choice], n: int) -> Usage:
    """As OpenAI counts: each prompt once, however many choices it has."""
    prompt = sum(len(c.request.prompt_ids) for c in choices[::n])
    completion = sum(c.finished.completion_tokens for c in choices if c.finished)
    return Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )


def _failed(path: str, choices: list[Choice]) -> JSONResponse | None:
    for choice in choices:
        if choice.finished and choice.finished.reason == FinishReason.ERROR:
            response = error_response(path, 503, f"Generation failed: {choice.finished.error}")
            response.headers["Retry-After"] = "5"
            return response
    return None


def _error_event(finished: Finished) -> str:
    """Mid-stream the status is sent already: the error goes in the stream, as OpenAI's."""
    error = {"message": f"Generation failed: {finished.error}", "type": "server_error"}
    return _sse({"error": {**error, "param": None, "code": None}})


def _sse(payload: BaseModel | dict[str, object]) -> str:
    text = payload.model_dump_json() if isinstance(payload, BaseModel) else json.dumps(payload)
    return f"data: {text}\n\n"


async def _answer(
    http: Request,
    runtime: Runtime,
    user: User,
    body: SamplingFields,
    max_tokens: int | None,
    render: Callable[["Engine", ServedModel], list[list[int]]],
    *,
    chat: bool,
) -> Any:
    _refuse_what_is_not_served(body)
    prepared = await run_in_threadpool(_prepare, runtime, user.id, body.model, render)
    queue: asyncio.Queue[tuple[int, EngineEvent]] = asyncio.Queue()
    timeout = runtime.query_service.timeout_seconds
    choices = _submit(prepared, body, max_tokens, queue, timeout)
    n = body.n
    ident = ("chatcmpl-" if chat else "cmpl-") + secrets.token_hex(12)
    created = int(time.time())
    if body.stream:
        usage = bool(body.stream_options and body.stream_options.include_usage)
        header = Header(ident, created, body.model, n)
        return StreamingResponse(
            _stream(http, choices, queue, ChunkShape(header, chat=chat), usage),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    async for _ in _events(choices, queue, http):
        pass
    failed = _failed(http.url.path, choices)
    if failed is not None:
        return failed
    if any(c.finished is None for c in choices):  # the client went away; no one reads this
        return error_response(http.url.path, 408, "The client went away")
    usage_total = _usage(choices, n)
    reasons = [FinishReason(c.finished.reason).value for c in choices if c.finished]
    if chat:
        return ChatCompletion(
            id=ident,
            created=created,
            model=body.model,
            choices=[
                ChatChoice(
                    index=c.index,
                    message=AssistantMessage(content="".join(c.text)),
                    finish_reason=reason,
                )
                for c, reason in zip(choices, reasons, strict=True)
            ],
            usage=usage_total,
        )
    return Completion(
        id=ident,
        created=created,
        model=body.model,
        choices=[
            TextChoice(index=c.index, text="".join(c.text), finish_reason=reason)
            for c, reason in zip(choices, reasons, strict=True)
        ],
        usage=usage_total,
    )


class ChunkShape:
    """How one kind of completion streams: its chunks, and what comes before them."""

    def __init__(self, header: "Header", *, chat: bool) -> None:
        self.header, self.chat = header, chat

    def _wrap(self, choices: list[Any], usage: Usage | None = None) -> str:
        h = self.header
        kind = ChatCompletionChunk if self.chat else Completion
        return _sse(kind(id=h.id, created=h.created, model=h.model, choices=choices, usage=usage))

    def opening(self, index: int) -> str | None:
        """Chat announces the assistant's role first; text completions say nothing."""
        if not self.chat:
            return None
        return self._wrap([ChunkChoice(index=index, delta=Delta(role="assistant", content=""))])

    def piece(self, index: int, text: str, finish: str | None = None) -> str:
        if self.chat:
            delta = Delta(content=text) if text else Delta()
            return self._wrap([ChunkChoice(index=index, delta=delta, finish_reason=finish)])
        return self._wrap([TextChoice(index=index, text=text, finish_reason=finish)])

    def usage(self, usage: Usage) -> str:
        return self._wrap([], usage)


async def _stream(
    http: Request,
    choices: list[Choice],
    queue: "asyncio.Queue[tuple[int, EngineEvent]]",
    shape: ChunkShape,
    include_usage: bool,
) -> AsyncIterator[str]:
    for choice in choices:
        if (opening := shape.opening(choice.index)) is not None:
            yield opening
    async for choice, event in _events(choices, queue, http):
        if isinstance(event, TextDelta):
            yield shape.piece(choice.index, event.text)
        elif event.reason == FinishReason.ERROR:
            yield _error_event(event)
            return
        else:
            yield shape.piece(choice.index, "", FinishReason(event.reason).value)
    if include_usage:
        yield shape.usage(_usage(choices, shape.header.n))
    yield "data: [DONE]\n\n"


@router.post(
    "/chat/completions",
    response_model=ChatCompletion,
    responses={**STREAMING, **errors(400, 404, 409, 429, 503)},
)
async def chat_completions(
    body: ChatCompletionCreate, http: Request, user: CurrentUser, runtime: RuntimeDep
) -> Any:
    """Answer a conversation with a base model, a fine-tuned model or a checkpoint of one."""
    max_tokens = body.max_completion_tokens or body.max_tokens
    return await _answer(http, runtime, user, body, max_tokens, _chat_prompt(body), chat=True)


@router.post(
    "/completions",
    response_model=Completion,
    responses={**STREAMING, **errors(400, 404, 409, 429, 503)},
)
async def completions(
    body: CompletionCreate, http: Request, user: CurrentUser, runtime: RuntimeDep
) -> Any:
    """Continue a text, without the chat template."""
    return await _answer(http, runtime, user, body, body.max_tokens, _text_prompt(body), chat=False)
