"""/v1/chat/completions and /v1/completions: OpenAI's shapes around the serving service.

The service resolves the model, renders the prompt and submits it, off the event loop;
this module turns its events into OpenAI's completion objects or server-sent chunks. A
client that goes away cancels its requests before the engine's next step.
"""

import asyncio
import json
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse
from pydantic import BaseModel
from sqlalchemy.orm import Session

from app.api.deps import CurrentUser, ServingDep, SessionDep
from app.api.errors import error_response
from app.api.openapi import errors
from app.core.language import tr
from app.db.models import User
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
    DeltaToolCall,
    FunctionCall,
    SamplingFields,
    TextChoice,
    ToolCall,
    Usage,
)
from app.services.serving.queries import (
    Chat,
    Choice,
    EngineEvent,
    Finished,
    Generation,
    Options,
    Serving,
    Text,
    TextDelta,
)
from app.services.serving.tool_use import ToolUse, chat_message

router = APIRouter()
STREAMING: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/event-stream": {}}, "description": "with stream: true"}
}


@router.post(
    "/chat/completions",
    response_model=ChatCompletion,
    responses={**STREAMING, **errors(400, 404, 409, 429, 503)},
)
async def chat_completions(
    body: ChatCompletionCreate,
    http: Request,
    user: CurrentUser,
    session: SessionDep,
    serving: ServingDep,
) -> Any:
    """Answer a conversation with a base model, a fine-tuned model or a checkpoint of one;
    with `tools`, the calls the model writes come back as `tool_calls`."""
    messages = [
        chat_message(
            m.role,
            m.text,
            [(c.id, c.function.name, c.function.arguments) for c in m.tool_calls or []],
            m.tool_call_id,
        )
        for m in body.messages
    ]
    prompt = Chat(messages, body.tool_definitions())
    max_tokens = body.max_completion_tokens or body.max_tokens
    return await _complete(http, body, max_tokens, prompt, user, session, serving, chat=True)


@router.post(
    "/completions",
    response_model=Completion,
    responses={**STREAMING, **errors(400, 404, 409, 429, 503)},
)
async def completions(
    body: CompletionCreate,
    http: Request,
    user: CurrentUser,
    session: SessionDep,
    serving: ServingDep,
) -> Any:
    """Continue a text, without the chat template."""
    prompt = Text([body.prompt] if isinstance(body.prompt, str) else body.prompt)
    return await _complete(http, body, body.max_tokens, prompt, user, session, serving, chat=False)


async def _complete(
    http: Request,
    body: SamplingFields,
    max_tokens: int | None,
    prompt: Chat | Text,
    user: User,
    session: Session,
    serving: Serving,
    *,
    chat: bool,
) -> Any:
    body.refuse_what_is_not_served()
    options = Options(
        max_tokens=max_tokens,
        temperature=body.temperature if body.temperature is not None else 1.0,
        top_p=body.top_p if body.top_p is not None else 1.0,
        seed=body.seed,
        stop=body.stops,
        ignore_eos=body.ignore_eos,
        n=body.n,
        budget="context",  # OpenAI's rule: until the end of the context
    )

    def start() -> tuple[Generation, ToolUse | None]:
        served = serving.resolve(session, user, body.model)
        session.commit()  # its connection goes back to the pool while the model answers
        tool_use = serving.tool_use(served, prompt)
        return serving.start(served, prompt, options, loop=loop), tool_use

    loop = asyncio.get_running_loop()
    generation, tool_use = await run_in_threadpool(start)
    shape = Shape(
        ("chatcmpl-" if chat else "cmpl-") + secrets.token_hex(12), body.model, chat, tool_use
    )
    if body.stream:
        usage = bool(body.stream_options and body.stream_options.include_usage)
        return StreamingResponse(
            _stream(http, generation, shape, usage),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    async for _ in generation.batches(http.is_disconnected):
        pass
    failed = generation.failure()
    if failed is not None:
        response = error_response(http.url.path, 503, f"Generation failed: {failed.error}")
        response.headers["Retry-After"] = "5"
        return response
    if any(c.finished is None for c in generation.choices):  # the client went away
        return error_response(http.url.path, 408, "The client went away")
    return shape.whole(generation)


@dataclass(frozen=True)
class Shape:
    """How one response looks: a chat or a text completion, whole or as chunks."""

    id: str
    model: str
    chat: bool
    tool_use: ToolUse | None = None  # the tools offered: answers are read for calls
    created: int = field(default_factory=lambda: int(time.time()))

    def whole(self, generation: Generation) -> ChatCompletion | Completion:
        usage = _usage(generation)
        ended = [(c, c.finished.reason) for c in generation.choices if c.finished]
        if self.chat:
            said = [_message(self.tool_use, c.answer, reason.value) for c, reason in ended]
            return ChatCompletion(
                id=self.id,
                created=self.created,
                model=self.model,
                choices=[
                    ChatChoice(index=c.index, message=message, finish_reason=finish)
                    for (c, _), (message, finish) in zip(ended, said, strict=True)
                ],
                usage=usage,
            )
        choices = [
            TextChoice(index=c.index, text=c.answer, finish_reason=reason.value)
            for c, reason in ended
        ]
        return Completion(
            id=self.id, created=self.created, model=self.model, choices=choices, usage=usage
        )

    def _wrap(self, choices: list[Any], usage: Usage | None = None) -> str:
        kind = ChatCompletionChunk if self.chat else Completion
        chunk = kind(
            id=self.id, created=self.created, model=self.model, choices=choices, usage=usage
        )
        return _sse(chunk)

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

    def message(self, index: int, message: AssistantMessage, finish: str) -> str:
        """A whole answer as one chunk: with tools, read for calls once it has ended."""
        calls = [
            DeltaToolCall(index=n, **call.model_dump())
            for n, call in enumerate(message.tool_calls or [])
        ]
        delta = Delta(content=message.content, tool_calls=calls or None)
        return self._wrap([ChunkChoice(index=index, delta=delta, finish_reason=finish)])

    def usage(self, usage: Usage) -> str:
        return self._wrap([], usage)


def _message(tool_use: ToolUse | None, answer: str, finish: str) -> tuple[AssistantMessage, str]:
    """The assistant's message, its calls taken out of the answer where tools were offered;
    OpenAI's finish reason for an answer that calls is `tool_calls`."""
    if tool_use is None:
        return AssistantMessage(content=answer), finish
    content, found = tool_use.split(answer)
    if not found:
        return AssistantMessage(content=answer), finish
    calls = [
        ToolCall(
            id=f"call_{secrets.token_hex(12)}",
            function=FunctionCall(name=c.name, arguments=c.arguments),
        )
        for c in found
    ]
    return AssistantMessage(content=content, tool_calls=calls), "tool_calls"


def _usage(generation: Generation) -> Usage:
    prompt, completion = generation.prompt_tokens, generation.completion_tokens
    return Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )


def _error_event(finished: Finished) -> str:
    """Mid-stream the status is sent already: the error goes in the stream, as OpenAI's."""
    error = {
        "message": tr("Generation failed: {problem}", problem=finished.error),
        "type": "server_error",
    }
    return _sse({"error": {**error, "param": None, "code": None}})


def _sse(payload: BaseModel | dict[str, object]) -> str:
    text = payload.model_dump_json() if isinstance(payload, BaseModel) else json.dumps(payload)
    return f"data: {text}\n\n"


async def _stream(
    http: Request, generation: Generation, shape: Shape, include_usage: bool
) -> AsyncIterator[str]:
    """The chunks as they come: whatever the engine has said since the last write goes out
    as one write, each choice's new text in one chunk (a client reads fewer, longer deltas
    when the server is busy, and the same text)."""
    openings = [shape.opening(choice.index) for choice in generation.choices]
    if opened := "".join(o for o in openings if o is not None):
        yield opened
    async with aclosing(generation.batches(http.is_disconnected)) as batches:
        async for batch in batches:
            chunks, failed = _chunks(batch, shape)
            if chunks:
                yield "".join(chunks)
            if failed:
                return
    if include_usage:
        yield shape.usage(_usage(generation))
    yield "data: [DONE]\n\n"


def _chunks(batch: list[tuple[Choice, EngineEvent]], shape: Shape) -> tuple[list[str], bool]:
    """One batch of events as chunks, a choice's texts in a row joined; True once an error
    has ended the stream (its event is the last chunk)."""
    tool_use = shape.tool_use
    chunks: list[str] = []
    text: list[str] = []  # of the choice `texting`, not sent yet
    texting = -1
    for choice, event in batch:
        if text and (choice.index != texting or not isinstance(event, TextDelta)):
            chunks.append(shape.piece(texting, "".join(text)))
            text = []
        if isinstance(event, TextDelta):
            if tool_use is None:  # an answer that may call is read whole, then sent
                text.append(event.text)
                texting = choice.index
        elif event.reason == "error":
            chunks.append(_error_event(event))
            return chunks, True
        elif tool_use is not None:
            message, finish = _message(tool_use, choice.answer, event.reason.value)
            chunks.append(shape.message(choice.index, message, finish))
        else:
            chunks.append(shape.piece(choice.index, "", event.reason.value))
    if text:
        chunks.append(shape.piece(texting, "".join(text)))
    return chunks, False
