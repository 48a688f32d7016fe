"""Sign-in throttling: guessing passwords gets slow, and nobody gets locked out for good.

Failures are counted per (account, client address), per client address, and per account.
Past a few free tries, each key must wait a delay that doubles with every further failure,
up to a cap; a success clears the (account, address) pair and the address. The per-account
count throttles a guesser who spreads over many addresses, but its cap is short, so an
attacker cannot use it to keep the owner out. Counts live in the process (a restart clears
them); several API processes each keep their own.
"""

import threading
import time
from dataclasses import dataclass

FREE_TRIES = {"pair": 5, "address": 20, "account": 50}
MAX_DELAY_S = {"pair": 900.0, "address": 900.0, "account": 60.0}
FORGET_AFTER_S = 3600.0  # a key that failed no more for an hour starts over


@dataclass
class _Record:
    failures: int = 0
    blocked_until: float = 0.0
    last_failure: float = 0.0


class LoginThrottle:
    def __init__(self) -> None:
        self._records: dict[tuple[str, str], _Record] = {}
        self._lock = threading.Lock()

    def _keys(self, username: str, address: str) -> list[tuple[str, str]]:
        return [("pair", f"{username}\x00{address}"), ("address", address), ("account", username)]

    def wait_seconds(self, username: str, address: str) -> float:
        """How long this sign-in must wait before it may be tried; 0: now."""
        now = time.monotonic()
        with self._lock:
            return max(
                (
                    self._records[k].blocked_until - now
                    for k in self._keys(username, address)
                    if k in self._records
                ),
                default=0.0,
            )

    def failed(self, username: str, address: str) -> None:
        now = time.monotonic()
        with self._lock:
            for key in self._keys(username, address):
                record = self._records.setdefault(key, _Record())
                if now - record.last_failure > FORGET_AFTER_S:
                    record.failures = 0
                record.failures += 1
                record.last_failure = now
                over = record.failures - FREE_TRIES[key[0]]
                if over > 0:
                    delay = min(MAX_DELAY_S[key[0]], 2.0 ** (over - 1))
                    record.blocked_until = now + delay
            if len(self._records) > 100_000:  # a flood of made-up names: drop the stale ones
                stale = [k for k, r in self._records.items() if now - r.last_failure > 60]
                for key in stale:
                    del self._records[key]

    def succeeded(self, username: str, address: str) -> None:
        with self._lock:
            for key in self._keys(username, address)[:2]:
                self._records.pop(key, None)
