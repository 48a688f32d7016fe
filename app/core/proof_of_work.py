"""Proofs of work for signing in to an account under a password-guessing attack.

Past `FREE_FAILURES` wrong passwords for an account within the throttle's memory, every
sign-in for that account, from anywhere, carries a proof: a challenge the service issued
(signed, single use, valid for five minutes) and a counter such that SHA-256 of
"challenge:counter" starts with `bits` zero bits. The owner's browser finds one in a
moment and signs in as always (no lockout, whatever the attacker does); a guesser pays
2^bits hashes for every guess, from however many addresses, and the price doubles as the
failures grow. Checking a proof costs the service one hash, before any password hash.
"""

import base64
import hashlib
import hmac
import math
import os
import re
import struct
import threading
import time

FREE_FAILURES = 10  # wrong passwords for an account before its sign-ins need work
BASE_BITS = 16  # 65,536 hashes on average: ~0.1 s in a browser
MAX_BITS = 20  # 1,048,576 hashes: ~3 s in a browser (docs/reliability.md), for each guess
CHALLENGE_SECONDS = 300.0
PROOF = re.compile(r"[0-9]{1,16}")
_LAYOUT = struct.Struct(">IB9s")  # issued (unix seconds), bits, nonce
_MAC_BYTES = 16


def bits_needed(failures: int) -> int:
    """0 while the account has had few failures; then 16 bits, one more each time the
    failures past the free ones double (10 more: 17; 30: 18; 70: 19; 150: 20, the most)."""
    over = failures - FREE_FAILURES
    if over < 0:
        return 0
    return min(MAX_BITS, BASE_BITS + int(math.log2(1 + over / FREE_FAILURES)))


def leading_zero_bits(digest: bytes) -> int:
    value = int.from_bytes(digest, "big")
    return len(digest) * 8 - value.bit_length()


def solve(challenge: str, bits: int) -> str:
    """A counter that proves the work (what the admin UI does in JavaScript)."""
    prefix = challenge.encode() + b":"
    counter = 0
    while leading_zero_bits(hashlib.sha256(prefix + str(counter).encode()).digest()) < bits:
        counter += 1
    return str(counter)


class Proofs:
    """Issues challenges and accepts each proof once. Thread-safe; kept in the process."""

    def __init__(self, secret: str) -> None:
        self._key = hashlib.sha256(b"qatune proof of work\0" + secret.encode()).digest()
        self._used: dict[bytes, float] = {}
        self._lock = threading.Lock()

    def issue(self, username: str, bits: int) -> str:
        raw = _LAYOUT.pack(int(time.time()), bits, os.urandom(9))
        return base64.urlsafe_b64encode(raw + self._mac(username, raw)).decode().rstrip("=")

    def accept(self, username: str, challenge: str, proof: str) -> bool:
        """The challenge is ours, for this account, fresh and unused, and the proof holds."""
        try:
            data = base64.urlsafe_b64decode(challenge + "=" * (-len(challenge) % 4))
        except ValueError:
            return False
        if len(data) != _LAYOUT.size + _MAC_BYTES or not PROOF.fullmatch(proof):
            return False
        raw, mac = data[: _LAYOUT.size], data[_LAYOUT.size :]
        if not hmac.compare_digest(mac, self._mac(username, raw)):
            return False
        issued, bits, nonce = _LAYOUT.unpack(raw)
        now = time.time()
        if not 0 <= now - issued <= CHALLENGE_SECONDS or bits < BASE_BITS:
            return False
        digest = hashlib.sha256(f"{challenge}:{proof}".encode()).digest()
        if leading_zero_bits(digest) < bits:
            return False
        with self._lock:
            if nonce in self._used:
                return False  # each proof signs in (or fails) once
            if len(self._used) > 10_000:
                self._used = {n: t for n, t in self._used.items() if t > now}
            self._used[nonce] = now + CHALLENGE_SECONDS
        return True

    def _mac(self, username: str, raw: bytes) -> bytes:
        message = username.encode() + b"\0" + raw
        return hmac.new(self._key, message, hashlib.sha256).digest()[:_MAC_BYTES]
