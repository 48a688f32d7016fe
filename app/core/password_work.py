"""Where argon2 runs: threads of its own, a bounded queue, and a share of it per address.

One check at the shipped cost is ~0.15 s of two cores and 64 MiB. Run in the server's
request pool, 20 sign-ins at once held 1.3 GB and put `/health`'s p99 at 0.4 s; the sign-in
route needs no token, so anyone could do that. Here at most `workers` checks run at once
(each already uses several cores), `waiting` more queue behind them, one address holding
at most a quarter of the queue, and past that a sign-in is answered 429 with the time the
queue needs to drain. The hash itself is not weakened.

The checks' threads run at a lower priority (niceness 10, Linux, where niceness is a
thread's own and the threads argon2 starts inherit it): a queue of checks kept every core
busy, and the event loop, which answers everyone else, waited its turn among argon2's
threads (`/health` p99 157 ms during 50 sign-ins at once, on 2 cores).

Only the event loop calls `run`, so its counts need no lock.
"""

import asyncio
import contextvars
import math
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import ParamSpec, TypeVar

from app.core.errors import TooManyRequests
from app.core.language import tr

P = ParamSpec("P")
T = TypeVar("T")
FIRST_GUESS_S = 0.2  # a check's duration before one has been timed


def default_workers() -> int:
    """argon2 spreads one check over 4 threads: a quarter of the cores, at least one."""
    return max(1, (os.cpu_count() or 1) // 4)


NICER = 10


def _lower_priority() -> None:
    if sys.platform != "linux":  # elsewhere a thread id is not a niceness's target
        return
    thread = threading.get_native_id()
    try:
        now = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(19, now + NICER))
    except OSError:
        pass  # (a sandbox that forbids it: the checks run as before)


class PasswordWork:
    def __init__(self, *, workers: int, waiting: int) -> None:
        self._pool = ThreadPoolExecutor(
            workers, thread_name_prefix="argon2", initializer=_lower_priority
        )
        self._workers = workers
        self._limit = workers + waiting
        self._per_address = max(1, self._limit // 4)
        self._held: Counter[str] = Counter()
        self._seconds = FIRST_GUESS_S  # a moving average of one call's duration

    @property
    def held(self) -> int:
        return sum(self._held.values())

    async def run(self, address: str, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`work(*args, **kwargs)` in the pool, for a request from `address`."""
        if self.held >= self._limit or self._held[address] >= self._per_address:
            full = self.held >= self._limit
            wait = math.ceil(
                (self.held if full else self._held[address]) * self._seconds / self._workers
            )
            raise TooManyRequests(
                tr(
                    "Too many sign-ins and password changes are being checked at once; "
                    "try again in {seconds} s",
                    seconds=max(1, wait),
                ),
                retry_after=max(1, wait),
            )
        self._held[address] += 1
        # In the request's context: its language says the errors raised there.
        context = contextvars.copy_context()
        try:
            return await asyncio.wrap_future(
                self._pool.submit(context.run, self._timed, partial(work, *args, **kwargs))
            )
        finally:
            self._held[address] -= 1
            if not self._held[address]:
                del self._held[address]

    def _timed(self, work: Callable[[], T]) -> T:
        started = time.monotonic()
        try:
            return work()
        finally:  # a float written whole: no lock for an estimate
            self._seconds = 0.8 * self._seconds + 0.2 * (time.monotonic() - started)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
