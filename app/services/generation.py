"""One question in the engine: its choices' events as they come, and how each ended.

The engine's thread hands every event to an inbox: a thread's queue for a caller that
waits for the whole answer (`answer`), or a deque for one that streams (`batches`), whose
event loop is woken once for whatever has come since it last looked, not once per token:
under load a stream takes several tokens per wake-up and sends them as one write. A
stream's batches come at most every `send_every` seconds (its first and its end at once):
each chunk costs the server a write and the client a parse, about what a decode step of a
small model costs, so a busy server sends fewer, longer chunks instead of slowing down.
Whatever happens in the engine, a waiter stops at the requests' deadline (and a little
after): a choice that has not ended by then ends with an error, and its request is
cancelled.
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

from app.ml.serving.requests import (
    EngineEvent,
    Finished,
    FinishReason,
    GenerationFailed,
    GenerationRequest,
    TextDelta,
)
from app.services.tool_use import ToolUse

GRACE_SECONDS = 10.0  # past a request's deadline before its waiter gives up on the engine
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


class Generation:
    """Made by Serving.start; `choices` are submitted already."""

    def __init__(
        self,
        *,
        model: str,
        n: int,
        loop: asyncio.AbstractEventLoop | None,
        tool_use: ToolUse | None = None,
        send_every: float = 0.0,
    ) -> None:
        self.model = model  # the name the caller asked for
        self.n = n  # choices per prompt
        self.tool_use = tool_use  # the tools offered: answers are read for calls
        self.send_every = send_every  # seconds between a stream's batches, at least
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
        one ended with an error."""
        while (left := self._unfinished()) and (wait := self._time_left()) > 0:
            try:
                self._take(*self._sync.get(timeout=wait))
            except queue.Empty:
                break
        self._give_up(left)
        self.raise_if_failed()
        return self.choices

    async def batches(
        self, disconnected: Callable[[], Awaitable[bool]]
    ) -> AsyncGenerator[list[tuple[Choice, EngineEvent]], None]:
        """Every choice's events until all have ended, in order, as many at a time as have
        come, `send_every` apart; the requests are cancelled if the caller stops early or
        goes away."""
        sent_at = -math.inf
        try:
            while self._unfinished() and self._time_left() > 0:
                if not self._inbox:
                    self._arrived.clear()
                    if not self._inbox:  # nothing came between the look and the clear
                        try:
                            await asyncio.wait_for(self._arrived.wait(), timeout=1.0)
                        except TimeoutError:
                            if await disconnected():
                                return
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

    def _give_up(self, choices: list[Choice]) -> list[Choice]:
        """The engine said nothing of these by their deadline: they end with an error."""
        for choice in choices:
            choice.request.cancel()
            request = choice.request
            choice.finished = Finished(
                FinishReason.ERROR,
                len(request.prompt_ids),
                len(request.generated),
                "no answer within the time limit; try again",
            )
        return choices


# what a caller hears, by type
__all__ = ["Choice", "EngineEvent", "Finished", "Generation", "TextDelta"]
