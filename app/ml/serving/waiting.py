"""The requests waiting to join an engine's batch: a turn per caller in rotation.

A script's burst of 400 chats no longer holds a colleague's one question behind all of it:
each caller (a user of the service; None for qatune's own) has a line of its own, oldest
first, and a row that frees in the batch goes to the caller whose turn is next. With one
caller this is first come, first served. Not thread-safe: the engine holds its lock.
"""

from collections import deque
from collections.abc import Iterable, Iterator

from app.ml.serving.requests import GenerationRequest


class WaitingLine:
    def __init__(self) -> None:
        # the callers in the order of their next turn (a dict keeps insertion order)
        self._lines: dict[int | None, deque[GenerationRequest]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[GenerationRequest]:
        return (request for line in self._lines.values() for request in line)

    def of(self, caller: int | None) -> int:
        """How many of `caller`'s requests wait."""
        line = self._lines.get(caller)
        return len(line) if line else 0

    def append(self, request: GenerationRequest) -> None:
        """At the end of its caller's line; a caller with none waiting takes its turn last."""
        self._lines.setdefault(request.caller, deque()).append(request)
        self._count += 1

    def first(self) -> GenerationRequest:
        """The request whose turn is next."""
        return next(iter(self._lines.values()))[0]

    def take(self) -> GenerationRequest:
        """The request whose turn is next, out of the line; its caller's next turn is last."""
        caller, line = next(iter(self._lines.items()))
        request = line.popleft()
        del self._lines[caller]
        if line:
            self._lines[caller] = line
        self._count -= 1
        return request

    def put_back(self, taken: Iterable[GenerationRequest]) -> None:
        """Requests taken that could not join yet: first again, in the order they were
        taken, each at the head of its caller's line."""
        lines: dict[int | None, deque[GenerationRequest]] = {}
        for request in taken:
            lines.setdefault(request.caller, deque()).append(request)
            self._count += 1
        for caller, line in self._lines.items():
            lines.setdefault(caller, deque()).extend(line)
        self._lines = lines

    def remove(self, request: GenerationRequest) -> None:
        line = self._lines[request.caller]
        line.remove(request)
        if not line:
            del self._lines[request.caller]
        self._count -= 1

    def clear(self) -> list[GenerationRequest]:
        """Every request, out of the line."""
        everyone = list(self)
        self._lines, self._count = {}, 0
        return everyone
