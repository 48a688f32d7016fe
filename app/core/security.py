"""Password hashing (argon2) and strength, JWTs (python-jose, HS256 pinned), API keys and
first-start secrets."""

import hashlib
import math
import os
import secrets
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from jose import JWTError, jwt

from app.core.errors import AuthError
from app.core.language import deferred, tr

ALGORITHM = "HS256"
API_KEY_PREFIX = "qk-"
MIN_PASSWORD_SCORE = 3  # zxcvbn: 0 guessable in seconds ... 4 safe for decades offline
MIN_SECRET_BITS = 100  # of a secret key's characters' measured entropy
_hasher = PasswordHasher()


@cache
def _dummy_hash() -> str:
    """Verified against when a username is unknown, so that a login for a user who does not
    exist takes as long as one with a wrong password (no user enumeration by timing). Made
    at the first sign-in, not at import: every command-line run would pay for it."""
    return _hasher.hash("qatune-dummy-password")


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(password: str, password_hash: str | None) -> bool:
    try:
        verified = _hasher.verify(password_hash or _dummy_hash(), password)
        return verified and password_hash is not None
    except (VerificationError, InvalidHashError):
        return False


# zxcvbn's feedback, each sentence a template so that tr() has it in every language
PASSWORD_FEEDBACK = frozenset(
    {
        deferred("Add another word or two. Uncommon words are better."),
        deferred("Capitalization doesn't help very much."),
        deferred("Reversed words aren't much harder to guess."),
        deferred("Predictable substitutions like '@' instead of 'a' don't help very much."),
        deferred("Use a few words, avoid common phrases."),
        deferred("No need for symbols, digits, or uppercase letters."),
        deferred("Straight rows of keys are easy to guess."),
        deferred("Short keyboard patterns are easy to guess."),
        deferred("This is a top-10 common password."),
        deferred("This is similar to a commonly used password."),
        deferred("A word by itself is easy to guess."),
        deferred("All-uppercase is almost as easy to guess as all-lowercase."),
        deferred("Use a longer keyboard pattern with more turns."),
        deferred('Repeats like "aaa" are easy to guess.'),
        deferred('Repeats like "abcabcabc" are only slightly harder to guess than "abc".'),
        deferred("This is a top-100 common password."),
        deferred("This is a very common password."),
        deferred("Names and surnames by themselves are easy to guess."),
        deferred("Common names and surnames are easy to guess."),
        deferred("Avoid repeated words and characters."),
        deferred('Sequences like "abc" or "6543" are easy to guess.'),
        deferred("Avoid sequences."),
        deferred("Recent years are easy to guess."),
        deferred("Dates are often easy to guess."),
        deferred("Avoid recent years."),
        deferred("Avoid years that are associated with you."),
        deferred("Avoid dates and years that are associated with you."),
    }
)


def password_problem(password: str, *, username: str) -> str | None:
    """Why a password is too weak (common, guessable, made of the username), or None."""
    from zxcvbn import zxcvbn

    if len(password) < 8:
        return tr("the password needs at least 8 characters")
    if len(password) > 256:
        return tr("the password may have at most 256 characters")
    # zxcvbn raises past its max_length (72 by default): its first 72 characters judge it
    result = zxcvbn(password[:72], user_inputs=[username, "qatune"])
    if result["score"] >= MIN_PASSWORD_SCORE:
        return None
    feedback = result["feedback"]
    why = tr(feedback.get("warning") or deferred("it would be guessed quickly"))
    hint = " ".join(tr(said) for said in feedback.get("suggestions", []))
    hint = hint or tr("Use a few uncommon words.")
    return tr("the password is too weak: {why}. {hint}", why=why.rstrip("."), hint=hint)


def secret_entropy_bits(secret: str) -> float:
    """Measured entropy of a string's characters, times its length: 'aaaa…' has none."""
    counts = Counter(secret)
    per_char = -sum(n / len(secret) * math.log2(n / len(secret)) for n in counts.values())
    return per_char * len(secret)


def create_access_token(*, subject: str, secret_key: str, minutes: int) -> str:
    now = datetime.now(UTC)
    claims = {"sub": subject, "iat": now, "exp": now + timedelta(minutes=minutes)}
    return jwt.encode(claims, secret_key, algorithm=ALGORITHM)


@dataclass(frozen=True)
class TokenClaims:
    subject: str
    issued_at: datetime


def decode_access_token(token: str, *, secret_key: str) -> TokenClaims:
    """The token's claims; AuthError if it is forged, malformed, expired or never expires."""
    try:
        claims = jwt.decode(
            token,
            secret_key,
            algorithms=[ALGORITHM],
            options={"require_exp": True, "require_iat": True, "require_sub": True},
        )
    except JWTError as exc:
        raise AuthError(tr("Invalid or expired token; sign in again at POST /auth/token")) from exc
    subject, issued_at = claims.get("sub"), claims.get("iat")
    if not isinstance(subject, str) or not isinstance(issued_at, int | float):
        raise AuthError(tr("Token has no subject; sign in again at POST /auth/token"))
    return TokenClaims(subject, datetime.fromtimestamp(issued_at, UTC))


@dataclass(frozen=True)
class NewApiKey:
    secret: str  # shown to its owner once, never stored
    prefix: str
    secret_hash: str


def new_api_key() -> NewApiKey:
    secret = API_KEY_PREFIX + secrets.token_urlsafe(32)
    return NewApiKey(secret, secret[:10], hash_api_key(secret))


def hash_api_key(secret: str) -> str:
    # A key is 256 random bits: a fast hash is safe, and it is checked on every request.
    return hashlib.sha256(secret.encode()).hexdigest()


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
