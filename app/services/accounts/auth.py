"""Who sent a request: a JWT from POST /auth/token or an API key, as one user."""

from sqlalchemy.orm import Session

from app.core.errors import AuthError
from app.core.language import tr
from app.core.names import number_in_digits
from app.core.security import API_KEY_PREFIX, decode_access_token
from app.db.models import User
from app.services.accounts import api_keys as api_keys_service
from app.services.accounts import users as users_service


def user_for_token(session: Session, token: str, *, secret_key: str) -> User:
    """The token's user; AuthError for anything else (a disabled user too), saying what to do."""
    user = _bearer(session, token, secret_key=secret_key)
    if user.disabled:
        raise AuthError(users_service.disabled_message())
    return user


def _bearer(session: Session, token: str, *, secret_key: str) -> User:
    if token.startswith(API_KEY_PREFIX):
        return api_keys_service.user_for_key(session, token)
    claims = decode_access_token(token, secret_key=secret_key)
    user_id = number_in_digits(claims.subject)
    user = session.get(User, user_id) if user_id is not None else None
    if user is None:
        raise AuthError(tr("The token's user no longer exists; sign in again"))
    changed = user.password_changed_at
    if changed is not None and claims.issued_at < changed.replace(microsecond=0):
        raise AuthError(tr("The password was changed since this token was issued; sign in again"))
    return user
