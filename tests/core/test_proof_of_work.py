"""Proofs of work for signing in under attack: the price schedule, and what is accepted."""

import hashlib

import pytest

from app.core import proof_of_work
from app.core.proof_of_work import Proofs, bits_needed, leading_zero_bits, solve


def test_the_price_starts_after_the_free_failures_and_doubles_with_them() -> None:
    assert [bits_needed(n) for n in (0, 9, 10, 19, 20, 40, 80, 160, 320, 10_000)] == [
        0, 0, 16, 16, 17, 18, 19, 20, 20, 20,
    ]  # fmt: skip


def test_a_proof_is_accepted_once_for_its_own_account_only() -> None:
    proofs = Proofs("a" * 40)
    challenge = proofs.issue("admin", 16)
    proof = solve(challenge, 16)
    digest = hashlib.sha256(f"{challenge}:{proof}".encode()).digest()
    assert leading_zero_bits(digest) >= 16
    assert not proofs.accept("alice", challenge, proof)  # another account's
    assert not Proofs("b" * 40).accept("admin", challenge, proof)  # another service's
    assert not proofs.accept("admin", challenge, str(int(proof) + 1))
    assert not proofs.accept("admin", challenge[:-2] + "AA", proof)  # tampered
    assert not proofs.accept("admin", "!" * 40, proof)
    assert not proofs.accept("admin", challenge, "12a")
    assert proofs.accept("admin", challenge, proof)
    assert not proofs.accept("admin", challenge, proof)  # used


def test_an_old_challenge_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    proofs = Proofs("a" * 40)
    challenge = proofs.issue("admin", 16)
    proof = solve(challenge, 16)
    later = proof_of_work.time.time() + proof_of_work.CHALLENGE_SECONDS + 1
    monkeypatch.setattr(proof_of_work.time, "time", lambda: later)
    assert not proofs.accept("admin", challenge, proof)
