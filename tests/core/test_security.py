import secrets
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from jose import jwt

from app.core import security
from app.core.config import Settings
from app.core.errors import AuthError

KEY = "hT3-qL9vW2xZ8rB5nM1cK7pY4sD6fG0j"


def test_password_hashes_verify_only_the_right_password() -> None:
    hashed = security.hash_password("correct horse")
    assert hashed.startswith("$argon2")
    assert security.verify_password("correct horse", hashed)
    assert not security.verify_password("wrong", hashed)
    assert not security.verify_password("anything", None)  # unknown user


def test_the_service_hashes_with_argon2id_at_rfc_9106s_parameters() -> None:
    """As shipped (the suite's own process hashes cheaply: tests/conftest.py)."""
    hashed = subprocess.run(
        [sys.executable, "-c", "from app.core.security import hash_password as h; print(h('x'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert hashed.startswith("$argon2id$v=19$m=65536,t=3,p=4$"), hashed


def test_token_round_trip_and_expiry() -> None:
    token = security.create_access_token(subject="7", secret_key=KEY, minutes=5)
    claims = security.decode_access_token(token, secret_key=KEY)
    assert claims.subject == "7"
    assert abs(claims.issued_at - datetime.now(UTC)) < timedelta(seconds=5)
    now = datetime.now(UTC)
    expired = jwt.encode({"sub": "7", "iat": now, "exp": now - timedelta(seconds=1)}, KEY)
    with pytest.raises(AuthError, match="expired"):
        security.decode_access_token(expired, secret_key=KEY)


def test_a_token_that_never_expires_is_refused() -> None:
    forever = jwt.encode({"sub": "7", "iat": datetime.now(UTC)}, KEY)
    with pytest.raises(AuthError):
        security.decode_access_token(forever, secret_key=KEY)


def test_forged_and_unsigned_tokens_are_refused() -> None:
    forged = security.create_access_token(subject="1", secret_key="x" * 48, minutes=5)
    with pytest.raises(AuthError):
        security.decode_access_token(forged, secret_key=KEY)
    header = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0"  # {"alg":"none"}
    with pytest.raises(AuthError):
        security.decode_access_token(f"{header}.eyJzdWIiOiIxIn0.", secret_key=KEY)


def test_generated_secret_is_persisted_private(tmp_path: Path) -> None:
    path = tmp_path / "secret_key"
    first = security.load_or_create_secret(path)
    assert len(first) >= 32
    assert path.stat().st_mode & 0o777 == 0o600
    assert security.load_or_create_secret(path) == first


@pytest.mark.parametrize(
    "secret", ["changeme", "short-secret", "a" * 32, "abc" * 16, "passwordpassword" * 2]
)
def test_placeholder_short_or_predictable_secret_keys_are_refused(secret: str) -> None:
    with pytest.raises(ValueError, match="QATUNE_SECRET_KEY"):
        Settings(secret_key=secret)
    assert Settings(secret_key=secrets.token_urlsafe(48))  # what qatune itself generates


@pytest.mark.parametrize(
    ("password", "why"),
    [
        ("password", "common"),
        ("12345678", "common"),
        ("alice2026", "weak"),
        ("alicealice", "weak"),
        ("short", "8 characters"),
    ],
)
def test_weak_passwords_are_refused_with_the_reason(password: str, why: str) -> None:
    problem = security.password_problem(password, username="alice")
    assert problem is not None and why in problem.lower()


def test_a_strong_password_passes() -> None:
    assert security.password_problem("kettle-marble-57-otter", username="alice") is None


def test_a_long_password_is_judged_not_a_server_error() -> None:
    """zxcvbn raises past 72 characters: an admin's reset with 200 once answered 500."""
    assert security.password_problem("0" * 200, username="alice") is not None  # one digit
    assert security.password_problem("kettle-marble-57-otter " * 8, username="alice") is None
    assert "256" in (security.password_problem("x" * 257, username="alice") or "")


def test_mps_watermark_below_low_ratio_is_refused() -> None:
    with pytest.raises(ValueError, match="LOW_WATERMARK"):
        Settings(mps_high_watermark_ratio=0.8)
    assert Settings(mps_high_watermark_ratio=0.8, mps_low_watermark_ratio=0.6)
    assert Settings(mps_high_watermark_ratio=0.0)  # 0 = no limit, allowed
