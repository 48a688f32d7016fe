"""Password hashing (argon2), JWTs (python-jose, HS256 pinned) and first-start secrets."""

import os
import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from jose import JWTError, jwt

from app.core.errors import AuthError

ALGORITHM = "HS256"
_hasher = PasswordHasher()
# Verified against when a username is unknown, so that a login for a user who does not
# exist takes as long as one with a wrong password (no user enumeration by timing).
_DUMMY_HASH = _hasher.hash("qatune-dummy-password")


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(password: str, password_hash: str | None) -> bool:
    try:
        return _hasher.verify(password_hash or _DUMMY_HASH, password) and password_hash is not None
    except (VerificationError, InvalidHashError):
        return False


def create_access_token(*, subject: str, secret_key: str, minutes: int) -> str:
    now = datetime.now(UTC)
    claims = {"sub": subject, "iat": now, "exp": now + timedelta(minutes=minutes)}
    return jwt.encode(claims, secret_key, algorithm=ALGORITHM)


def decode_access_token(token: str, *, secret_key: str) -> str:
    """Return the token's subject; AuthError if it is forged, malformed or expired."""
    try:
        claims = jwt.decode(token, secret_key, algorithms=[ALGORITHM])
    except JWTError as exc:
        raise AuthError("Invalid or expired token; sign in again at POST /auth/token") from exc
    subject = claims.get("sub")
    if not isinstance(subject, str):
        raise AuthError("Token has no subject; sign in again at POST /auth/token")
    return subject


def write_private_file(path: Path, content: str) -> None:
    """Create `path` readable by its owner only (0600), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(content)
    os.replace(tmp, path)


def load_or_create_secret(path: Path) -> str:
    """The JWT key: generated once at first start and kept (0600) so tokens survive restarts."""
    if path.exists():
        return path.read_text().strip()
    key = secrets.token_urlsafe(48)
    write_private_file(path, key + "\n")
    return key


def generate_password() -> str:
    return secrets.token_urlsafe(18)
