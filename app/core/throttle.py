"""Sign-in throttling: guessing passwords gets slow, and nobody gets locked out.

Failures are counted per (account, source address), per source and per account. The pair
and the source, past a few free tries, wait a delay that doubles with every further
failure, up to 15 minutes: one host guessing is slowed whatever accounts it tries, and an
owner who mistypes from home has 5 free tries before any wait. The account's count never
delays anyone: past its free failures every sign-in for the account, from any address,
carries a proof of work whose price doubles as the failures do (proof_of_work.py). A
guesser spread over a botnet pays for each guess; the owner pays a moment of their
browser's time and is never kept out. A success clears the (account, source) pair and the
source. Which address a request comes from is the peer's, unless QATUNE_TRUSTED_PROXIES
names the proxy that sets X-Forwarded-For. Counts live in the process (a restart clears
them); several API processes each keep their own.
"""

import threading
import time
from dataclasses import dataclass
from typing import Literal

from app.core.proof_of_work import bits_needed

Scope = Literal["pair", "address", "account"]
FREE_TRIES: dict[Scope, int] = {"pair": 5, "address": 20}
MAX_DELAY_S = 900.0
FORGET_AFTER_S = 3600.0  # a key that failed no more for an hour starts over


@dataclass
class _Record:
    failures: int = 0
    blocked_until: float = 0.0
    last_failure: float = 0.0


class LoginThrottle:
    def __init__(self) -> None:
        self._records: dict[tuple[Scope, str], _Record] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _pair(username: str, address: str) -> tuple[Scope, str]:
        return ("pair", f"{username}\x00{address}")

    def wait_seconds(self, username: str, address: str) -> float:
        """How long this sign-in must wait before it may be tried; 0: now."""
        now = time.monotonic()
        keys = [self._pair(username, address), ("address", address)]
        with self._lock:
            waits = [self._records[k].blocked_until - now for k in keys if k in self._records]
        return max(waits, default=0.0)

    def work_needed(self, username: str) -> int:
        """The proof of work a sign-in for this account must carry now, in bits; 0: none."""
        now = time.monotonic()
        with self._lock:
            record = self._records.get(("account", username))
            fresh = record is not None and now - record.last_failure <= FORGET_AFTER_S
            return bits_needed(record.failures) if fresh and record else 0

    def failed(self, username: str, address: str) -> None:
        now = time.monotonic()
        with self._lock:
            self._count(self._pair(username, address), now)
            self._count(("address", address), now)
            self._count(("account", username), now)
            if len(self._records) > 100_000:  # a flood of made-up names: drop the stale ones
                stale = [k for k, r in self._records.items() if now - r.last_failure > 60]
                for key in stale:
                    del self._records[key]

    def _count(self, key: tuple[Scope, str], now: float) -> _Record:
        record = self._records.setdefault(key, _Record())
        if now - record.last_failure > FORGET_AFTER_S:
            record.failures = 0
        record.failures += 1
        record.last_failure = now
        record.blocked_until = now + _delay(key[0], record)
        return record

    def succeeded(self, username: str, address: str) -> None:
        with self._lock:
            for key in (self._pair(username, address), ("address", address)):
                self._records.pop(key, None)


def _delay(scope: Scope, record: _Record) -> float:
    if scope == "account":  # an account's failures ask for work, never for waiting
        return 0.0
    over = record.failures - FREE_TRIES[scope]
    return 0.0 if over <= 0 else min(MAX_DELAY_S, 2.0 ** (over - 1))
