"""What a caller asks the engine for, and what it hears back: typed, no dicts."""

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from loguru import logger

from app.core.language import tr


@dataclass(frozen=True)
class EngineLimits:
    max_batch: int = 32  # rows decoded together, at most…
    kv_cache_bytes: int = 1024 * 2**20  # …and their key/value cache's bytes (kv_budget.py)
    max_waiting: int = 256  # a caller's requests queued beyond those; more is a 429
    max_adapters: int = 0  # adapters kept loaded on this base at most (0: no count)…
    max_adapter_bytes: int = 512 * 2**20  # …and their weights' bytes, in the serving dtype
    merge_budget_bytes: int = 1024 * 2**20  # for saved base weights, to merge one adapter


@dataclass(frozen=True)
class Sampling:
    """How to pick tokens; temperature 0 is greedy (and ignores top_p and the seed)."""

    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    min_p: float = 0.0  # tokens less likely than min_p × the likeliest are never picked
    seed: int | None = None
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False  # vLLM's option: exactly max_tokens, for benchmarks


@dataclass(frozen=True)
class AdapterRef:
    """A trained adapter on disk; `key` names it in the engine's cache."""

    key: str
    directory: Path


class FinishReason(StrEnum):
    STOP = "stop"  # end of turn or a stop sequence
    LENGTH = "length"  # max_tokens or the model's context
    CANCELLED = "cancelled"  # the caller went away
    ERROR = "error"  # the adapter could not be loaded, the deadline passed, …


@dataclass(frozen=True)
class TextDelta:
    """New text; never splits a UTF-8 character or shows part of a stop sequence."""

    text: str


@dataclass(frozen=True)
class Finished:
    reason: FinishReason
    prompt_tokens: int
    completion_tokens: int
    error: str | None = None


EngineEvent = TextDelta | Finished


@dataclass
class GenerationRequest:
    prompt_ids: list[int]
    adapter: AdapterRef | None
    sampling: Sampling
    on_event: Callable[[EngineEvent], None]  # called on the engine's thread
    deadline: float  # time.monotonic() after which the request is ended
    # The caller's own end: given the tokens so far, True stops the request (STOP) there.
    enough: Callable[[list[int]], bool] | None = None
    # False: the caller reads only the whole answer (its Finished's request.generated), so
    # the text is not decoded and sent at each token (stop sequences still are watched)
    stream_text: bool = True
    # The question alone (scope.py): an adapter with a scope answers it only if it falls
    # inside; else the base does. None: the adapter answers whatever the prompt is.
    question_ids: list[int] | None = None
    # The prompt as the base alone is given it, where the scope sends the question there:
    # without the system prompt the adapter was trained with, which is the adapter's own.
    base_prompt_ids: list[int] | None = None
    # Who asked (a user's id; None: qatune itself): the waiting line takes a turn per caller
    # (waiting.py), and max_waiting counts each caller's own requests
    caller: int | None = None
    cancelled: bool = False
    submitted_at: float = 0.0
    first_token_at: float | None = None
    generated: list[int] = field(default_factory=list)
    text_sent: str = ""
    ended: bool = False  # its Finished was sent: nothing more is

    def cancel(self) -> None:
        """Any thread: the engine ends the request before its next step."""
        self.cancelled = True


class AskFailed(Exception):
    """Asking a model failed, whatever the reason (the one failure asking.py's callers
    catch): the model could not be loaded, the queue is full, the prompt has no room, the
    engine failed, or it made no progress."""


class QueueFull(AskFailed):
    """More of a caller's requests are waiting than the engine accepts; retry after
    `retry_after` s."""

    def __init__(self, waiting: int, retry_after: int) -> None:
        super().__init__(
            tr(
                "The server is busy: {waiting} of your requests are already waiting for this "
                "model; retry in {seconds} s",
                waiting=waiting,
                seconds=retry_after,
            )
        )
        self.retry_after = retry_after


class PromptTooLong(AskFailed, ValueError):
    """The prompt leaves no room for an answer in the model's context."""

    def __init__(self, tokens: int, base_model: str, context: int) -> None:
        super().__init__(
            tr(
                "The prompt is {count} tokens; {base_model} reads {context} at most, answer "
                "included",
                count=tokens,
                base_model=base_model,
                context=context,
            )
        )


class GenerationFailed(AskFailed, RuntimeError):
    """The engine ended the request with an error (deleted model, deadline, …)."""


class BackendUnavailable(GenerationFailed):
    """No server of the serving backend can take a request now: a 503 with Retry-After."""

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class AdapterNotServed(GenerationFailed):
    """The serving backend refused an adapter, or serves the base model under its name."""


@dataclass(frozen=True)
class ReplicaStats:
    """One vLLM server of a base model."""

    url: str
    up: bool
    running: int
    adapters: int
    problem: str  # why it is down ("" when up)
    restarts: int  # by qatune, of a server it started


@dataclass(frozen=True)
class EngineStats:
    base_model: str
    running: int
    waiting: int
    adapters: list[str]
    adapter_bytes: int
    generated_tokens: int = 0  # since the engine started (GET /metrics rates them)
    finished_requests: int = 0
    backend: str = "builtin"
    replicas: list[ReplicaStats] = field(default_factory=list)  # vLLM's servers


def tell(request: GenerationRequest, event: EngineEvent) -> None:
    """A caller whose callback raises has gone: its request is cancelled, nobody else's."""
    try:
        request.on_event(event)
    except Exception:
        logger.exception("A caller could not take an event; its request is cancelled")
        request.cancel()


def finish(request: GenerationRequest, reason: FinishReason, error: str | None = None) -> bool:
    """End the request with its one Finished; False if it had ended already."""
    if request.ended:
        return False
    request.ended = True
    tell(request, Finished(reason, len(request.prompt_ids), len(request.generated), error))
    return True
