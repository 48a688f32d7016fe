"""Sign-in throttling: guessing passwords gets slow, and nobody gets locked out for good.

Failures are counted per (account, source address), per source and per account. Past a few
free tries, each count makes its key wait a delay that doubles with every further failure,
up to a cap. The account's count throttles a guesser who spreads over many addresses, but
it only ever delays sources that are failing for that account: a source that has not
failed there (the owner, elsewhere) is never refused, so no attacker can keep the owner
out, and each guessing source gets one try per account delay. A success clears the
(account, source) pair and the source. Which address a request comes from is the peer's,
unless QATUNE_TRUSTED_PROXIES names the proxy that sets X-Forwarded-For. Counts live in the
process (a restart clears them); several API processes each keep their own.
"""

import threading
import time
from dataclasses import dataclass
from typing import Literal

Scope = Literal["pair", "address", "account"]
FREE_TRIES: dict[Scope, int] = {"pair": 5, "address": 20, "account": 50}
MAX_DELAY_S: dict[Scope, float] = {"pair": 900.0, "address": 900.0, "account": 900.0}
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

    def failed(self, username: str, address: str) -> None:
        now = time.monotonic()
        with self._lock:
            pair = self._count(self._pair(username, address), now)
            self._count(("address", address), now)
            account = self._count(("account", username), now)
            # The account's delay falls on this failing source only, never on the others.
            pair.blocked_until = max(pair.blocked_until, now + _delay("account", account))
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
    over = record.failures - FREE_TRIES[scope]
    return 0.0 if over <= 0 else min(MAX_DELAY_S[scope], 2.0 ** (over - 1))
