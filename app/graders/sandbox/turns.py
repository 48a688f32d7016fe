"""Turns at the sandbox's slots, fair between users: each user's calls wait in a line of
their own, and a slot that frees goes to the next user in rotation, not to whoever asked
first. One user's thousand slow calls then hold back another's next call by at most the
calls already running, not by the thousand."""

import asyncio
from collections import OrderedDict, deque


class Turns:
    """Slots for one event loop (asyncio's futures belong to one)."""

    def __init__(self, slots: int) -> None:
        self.free = list(range(slots))  # slot numbers: a sandbox's user ID follows its slot
        self.lines: OrderedDict[str, deque[asyncio.Future[int]]] = OrderedDict()

    async def take(self, owner: str) -> int:
        """A slot's number once it is this owner's turn; cancelling gives it up."""
        if self.free and not self.lines:
            return self.free.pop(0)
        turn: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.lines.setdefault(owner, deque()).append(turn)
        try:
            return await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # given a slot, then cancelled
                self.give_back(turn.result())
            else:
                self._leave(owner, turn)
            raise

    def give_back(self, slot: int) -> None:
        """The slot goes to the first owner in rotation, who moves to the back."""
        while self.lines:
            owner, line = next(iter(self.lines.items()))
            turn = line.popleft()
            del self.lines[owner]
            if line:
                self.lines[owner] = line
            if not turn.done():
                turn.set_result(slot)
                return
        self.free.append(slot)

    def _leave(self, owner: str, turn: "asyncio.Future[int]") -> None:
        line = self.lines.get(owner)
        if line is not None and turn in line:
            line.remove(turn)
            if not line:
                del self.lines[owner]
