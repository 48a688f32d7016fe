"""Asking a model: the one way into an engine.

Everything in qatune that puts a question to a model comes through here: the service's
answers (the native query, /v1 completions, the playground, `qatune ask`), judge models in
the service and in a training process, eval runs, reinforcement sampling and a job's answer
table. `chat_ids` renders a conversation as the model was trained on it (with the system
prompt of its training data), `token_budget` decides an answer's tokens within the
context's room, and `ask` submits one request a row and hands back one `Generation`, which
a caller waits on whole (blocking: `answer`; async: `wait`) or streams (`batches`). Every
failure is an `AskFailed` (requests.py): the model not loaded, the queue full, a prompt
with no room, the engine's error, no progress.

The engine's thread hands every event to an inbox: a thread's queue for a caller that
waits for the whole answer, or a deque for one that streams, whose event loop is woken
once for whatever has come since it last looked, not once per token: under load a stream
takes several tokens per wake-up and sends them as one write. A stream's batches come at
most every `send_every` seconds (its first and its end at once): each chunk costs the server
a write and the client a parse, about what a decode step of a small model costs. Whatever
happens in the engine, a waiter stops at the requests' deadline (and a little after), or
once no row has had a token for `stall_seconds`: a row that has not ended by then ends with
an error, and its request is cancelled.
"""

import asyncio
import contextlib
import math
import queue
import threading
import time
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.core.language import tr
from app.ml.serving.requests import (
    AdapterRef,
    AskFailed,
    EngineEvent,
    Finished,
    FinishReason,
    GenerationFailed,
    GenerationRequest,
    Sampling,
    TextDelta,
)

GRACE_SECONDS = 10.0  # past a request's deadline before its waiter gives up on the engine
GONE_CHECK_SECONDS = 1.0  # how often a waiting caller is looked at: gone, its rows are cancelled
Delivery = tuple[int, EngineEvent]  # (choice index, event)


@dataclass
class Choice:
    index: int
    request: GenerationRequest
    text: list[str] = field(default_factory=list)
    finished: Finished | None = None

    @property
    def answer(self) -> str:
        return "".join(self.text)

    @property
    def token_ids(self) -> list[int]:
        """The answer's tokens (a row asked with stream_text=False has no text events)."""
        return list(self.request.generated)


class Generation:
    """The answers to one `ask`, as they come; its `choices` are submitted already."""

    def __init__(
        self,
        *,
        n: int = 1,
        loop: asyncio.AbstractEventLoop | None = None,
        send_every: float = 0.0,
        stall_seconds: float = math.inf,
    ) -> None:
        self.n = n  # choices per prompt
        self.send_every = send_every  # seconds between a stream's batches, at least
        self.stall_seconds = stall_seconds  # no new token in any row for this long: given up
        self.choices: list[Choice] = []
        self._loop = loop
        self._sync: queue.SimpleQueue[Delivery] = queue.SimpleQueue()
        self._inbox: deque[Delivery] = deque()  # appended on the engine's thread
        self._arrived = asyncio.Event()
        self._end_told = False  # a Finished was delivered (on the engine's thread)
        self._ending = asyncio.Event()  # set once a wake-up has seen one: no more holding
        self._wake_lock = threading.Lock()
        self._wake_pending = False  # a wake-up is on its way to the loop

    def sink(self, index: int) -> Callable[[EngineEvent], None]:
        """The engine's callback for choice `index` (called on the engine's thread)."""
        loop = self._loop

        def deliver(event: EngineEvent) -> None:
            if loop is None:
                self._sync.put((index, event))
                return
            if isinstance(event, Finished):
                self._end_told = True
            self._inbox.append((index, event))  # before the flag: a pending wake-up sees it
            with self._wake_lock:
                if self._wake_pending:
                    return
                self._wake_pending = True
            # RuntimeError once the loop has closed: the engine cancels the request
            loop.call_soon_threadsafe(self._wake_up)

        return deliver

    def _wake_up(self) -> None:  # on the event loop
        with self._wake_lock:
            self._wake_pending = False
        self._arrived.set()
        if self._end_told:
            self._ending.set()

    def add(self, request: GenerationRequest) -> None:
        self.choices.append(Choice(len(self.choices), request))

    # ------------------------------------------------------------------- waiting
    def answer(self) -> list[Choice]:
        """Every choice, whole (blocking: call it off the event loop); GenerationFailed if
        one ended with an error, or none made progress for `stall_seconds`."""
        self.settle()
        self.raise_if_failed()
        return self.choices

    def settle(self) -> list[Choice]:
        """Every choice ended, one way or another (blocking); a row given up on ends with
        an error, which this does not raise."""
        progress, moved_at = -1, time.monotonic()
        while (left := self._unfinished()) and (wait := self._time_left()) > 0:
            made = sum(len(c.request.generated) for c in left)
            if made != progress:
                progress, moved_at = made, time.monotonic()
            stalled = time.monotonic() - moved_at
            if stalled >= self.stall_seconds:
                self._give_up(left, stalled=True)
                break
            try:
                self._take(*self._sync.get(timeout=min(wait, 1.0, self.stall_seconds)))
            except queue.Empty:
                continue
        self._give_up(self._unfinished())
        return self.choices

    async def batches(
        self, disconnected: Callable[[], Awaitable[bool]]
    ) -> AsyncGenerator[list[tuple[Choice, EngineEvent]], None]:
        """Every choice's events until all have ended, in order, as many at a time as have
        come, `send_every` apart; the requests are cancelled if the caller stops early or
        goes away."""
        sent_at = -math.inf
        looked_at = time.monotonic()  # when the caller was last seen still there
        try:
            while self._unfinished() and self._time_left() > 0:
                # Once a second even while tokens flow: an answer that is not streamed
                # sends nothing that would fail, and a caller gone (a client's timeout,
                # then its retry) would be answered to the end for no one.
                if time.monotonic() - looked_at >= GONE_CHECK_SECONDS:
                    looked_at = time.monotonic()
                    if await disconnected():
                        return
                if not self._inbox:
                    self._arrived.clear()
                    if not self._inbox:  # nothing came between the look and the clear
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(self._arrived.wait(), timeout=GONE_CHECK_SECONDS)
                        continue
                hold = sent_at + self.send_every - time.monotonic()
                if hold > 0 and not self._ending.is_set():  # an ending cuts the hold short
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._ending.wait(), timeout=hold)
                taken = [self._inbox.popleft() for _ in range(len(self._inbox))]
                yield [(self._take(index, event), event) for index, event in taken]
                sent_at = time.monotonic()
            given_up = self._give_up(self._unfinished())
            if given_up:
                yield [(choice, choice.finished) for choice in given_up if choice.finished]
        finally:
            self.cancel()

    def cancel(self) -> None:
        for choice in self._unfinished():
            choice.request.cancel()

    # ------------------------------------------------------------------- results
    def failure(self) -> Finished | None:
        return next(
            (c.finished for c in self.choices if c.finished and c.finished.reason == "error"),
            None,
        )

    def raise_if_failed(self) -> None:
        failed = self.failure()
        if failed is not None:
            raise GenerationFailed(failed.error or "the model could not answer")

    @property
    def prompt_tokens(self) -> int:
        """As OpenAI counts: each prompt once, however many choices it has."""
        return sum(len(c.request.prompt_ids) for c in self.choices[:: self.n])

    @property
    def completion_tokens(self) -> int:
        return sum(c.finished.completion_tokens for c in self.choices if c.finished)

    # ---------------------------------------------------------------- internals
    def _take(self, index: int, event: EngineEvent) -> Choice:
        choice = self.choices[index]
        if isinstance(event, TextDelta):
            choice.text.append(event.text)
        else:
            choice.finished = event
        return choice

    def _unfinished(self) -> list[Choice]:
        return [c for c in self.choices if c.finished is None]

    def _time_left(self) -> float:
        deadline = max((c.request.deadline for c in self.choices), default=0.0)
        return deadline + GRACE_SECONDS - time.monotonic()

    def _give_up(self, choices: list[Choice], *, stalled: bool = False) -> list[Choice]:
        """The engine said nothing of these by their deadline (or made no progress on any
        for `stall_seconds`): they end with an error."""
        why = (
            tr("no progress for {seconds:g} s", seconds=self.stall_seconds)
            if stalled
            else tr("no answer within the time limit; try again")
        )
        for choice in choices:
            choice.request.cancel()
            request = choice.request
            choice.finished = Finished(
                FinishReason.ERROR, len(request.prompt_ids), len(request.generated), why
            )
        return choices


# -------------------------------------------------------------------------- asking
class Engines(Protocol):
    """What `ask` needs of an engine (the built-in one, or vLLM's client)."""

    context: int

    def submit(self, request: GenerationRequest) -> None: ...


@dataclass(frozen=True)
class Row:
    """One prompt to answer: its tokens, the adapter to answer with, how to sample."""

    prompt_ids: list[int]
    adapter: AdapterRef | None
    sampling: Sampling
    # The caller's own end: given the tokens so far, True stops the row (STOP) there.
    enough: Callable[[list[int]], bool] | None = None
    stream_text: bool = True  # False: only the whole answer is read (no text events)
    question_ids: list[int] | None = None  # the question alone, for the adapter's scope
    base_prompt_ids: list[int] | None = None  # the prompt, should the scope give it the base


class ChatNotRendered(AskFailed, ValueError):
    """The model's chat template refused the conversation."""


class NoRoom(AskFailed, ValueError):
    """The prompt leaves no room in the model's context (for the tokens asked)."""

    def __init__(self, message: str, *, asked: bool) -> None:
        super().__init__(message)
        self.asked = asked  # True: it was the tokens asked for; False: the prompt itself


def chat_ids(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    *,
    system_prompt: str | None = None,
    tools: list[dict[str, Any]] | None = None,
) -> list[int]:
    """The conversation as the model takes it, up to the assistant's turn; asked as it was
    trained: with the system prompt of its training data, unless the messages bring one."""
    from app.ml.data import prompt_ids  # torch, transformers: not for importers of Row

    if system_prompt and (not messages or messages[0].get("role") != "system"):
        messages = [{"role": "system", "content": system_prompt}, *messages]
    try:
        return prompt_ids(tokenizer, messages, tools)
    except Exception as exc:  # the model's own template refused the conversation
        raise ChatNotRendered(
            tr("The model's chat template cannot render these messages: {exc}", exc=exc)
        ) from exc


def question_ids(tokenizer: Any, question: str) -> list[int]:
    """The question's own tokens, no chat template around them: what an adapter's scope
    reads (app/ml/scope.py)."""
    return list(tokenizer(question, add_special_tokens=False).input_ids)


def token_budget(
    *, model: str, context: int, prompt_tokens: int, asked: int | None, default: int | None
) -> int:
    """An answer's tokens: what was asked if it fits the context's room, else `default`
    within the room (None: the whole room). NoRoom if the prompt leaves none, or the
    tokens asked do not fit."""
    room = context - prompt_tokens
    if room <= 0:
        raise NoRoom(
            tr(
                "The prompt is {prompt_tokens} tokens; {base_model} reads {context} at most, "
                "answer included: shorten it",
                prompt_tokens=prompt_tokens,
                base_model=model,
                context=context,
            ),
            asked=False,
        )
    if asked is not None and asked > room:
        raise NoRoom(
            tr(
                "The prompt is {prompt_tokens} tokens and {base_model} reads {context}: "
                "ask for at most {room} new tokens",
                prompt_tokens=prompt_tokens,
                base_model=model,
                context=context,
                room=room,
            ),
            asked=True,
        )
    if asked is not None:
        return asked
    return room if default is None else min(room, default)


def ask(
    engine: Engines,
    rows: list[Row],
    *,
    seconds: float,
    n: int = 1,
    loop: asyncio.AbstractEventLoop | None = None,
    send_every: float = 0.0,
    stall_seconds: float = math.inf,
    caller: int | None = None,
) -> Generation:
    """Submit every row (`n` rows a prompt, in order) with a deadline `seconds` from now,
    as `caller`'s (a user's id: the engine's line takes a turn per caller); the events go to
    `loop`'s `batches` if given, else to `answer`. QueueFull or PromptTooLong (both
    AskFailed) if the engine takes them not: none is left running."""
    generation = Generation(n=n, loop=loop, send_every=send_every, stall_seconds=stall_seconds)
    deadline = time.monotonic() + seconds
    try:
        for index, row in enumerate(rows):
            request = GenerationRequest(
                row.prompt_ids,
                row.adapter,
                row.sampling,
                generation.sink(index),
                deadline,
                enough=row.enough,
                stream_text=row.stream_text,
                question_ids=row.question_ids,
                base_prompt_ids=row.base_prompt_ids,
                caller=caller,
            )
            engine.submit(request)
            generation.add(request)
    except BaseException:
        generation.cancel()
        raise
    return generation


__all__ = [
    "AskFailed",
    "ChatNotRendered",
    "Choice",
    "EngineEvent",
    "Finished",
    "Generation",
    "NoRoom",
    "Row",
    "TextDelta",
    "ask",
    "chat_ids",
    "question_ids",
    "token_budget",
]
