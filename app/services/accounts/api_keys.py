"""API keys: long-lived bearer secrets for tools that cannot sign in (the openai client).

A key acts as its user, with the same isolation. Only its SHA-256 is stored; the secret
is shown once, when it is made. A revoked key is refused at once.
"""

from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.errors import AuthError, NotFoundError
from app.core.language import tr
from app.core.security import NewApiKey, hash_api_key, new_api_key
from app.db.base import utcnow
from app.db.models import ApiKey, User

LAST_USED_RESOLUTION = timedelta(minutes=1)  # not a write on every request


def create_key(session: Session, *, user: User, name: str) -> tuple[ApiKey, NewApiKey]:
    made = new_api_key()
    key = ApiKey(owner_id=user.id, name=name, prefix=made.prefix, secret_hash=made.secret_hash)
    session.add(key)
    session.flush()
    return key, made


def list_keys(session: Session, *, user: User) -> list[ApiKey]:
    query = select(ApiKey).where(ApiKey.owner_id == user.id, ApiKey.revoked_at.is_(None))
    return list(session.scalars(query.order_by(ApiKey.id.desc())))


def revoke_key(session: Session, *, user: User, key_id: int) -> ApiKey:
    key = session.scalar(
        select(ApiKey).where(
            ApiKey.id == key_id, ApiKey.owner_id == user.id, ApiKey.revoked_at.is_(None)
        )
    )
    if key is None:
        raise NotFoundError(
            tr("API key {key_id} not found; GET /api-keys lists yours", key_id=key_id)
        )
    key.revoked_at = utcnow()
    return key


def user_for_key(session: Session, secret: str) -> User:
    key = session.scalar(select(ApiKey).where(ApiKey.secret_hash == hash_api_key(secret)))
    if key is None or key.revoked_at is not None:
        raise AuthError(tr("Invalid or revoked API key; create one at POST /api-keys"))
    now = utcnow()
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
        key.last_used_at = now
    return key.owner
