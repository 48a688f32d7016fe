"""Typed dependencies every route takes: the session, the current user, the context."""

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import OAuth2PasswordBearer
from sqlalchemy.orm import Session

from app.api.context import AppContext
from app.core.errors import AuthError, ForbiddenError
from app.core.security import decode_access_token
from app.db.models import User

oauth2_scheme = OAuth2PasswordBearer(tokenUrl="/auth/token", auto_error=False)


def get_context(request: Request) -> AppContext:
    context: AppContext = request.app.state.context
    return context


ContextDep = Annotated[AppContext, Depends(get_context)]


def get_session(context: ContextDep) -> Iterator[Session]:
    with context.database.session() as session:
        yield session


# scope="function": commit before the response is sent. FastAPI's default ends a yield
# dependency after the response, so a client could read right after a 201 and not find
# what it created, or get a 201 for a commit that then failed.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


def get_current_user(
    context: ContextDep, session: SessionDep, token: Annotated[str | None, Depends(oauth2_scheme)]
) -> User:
    if not token:
        raise AuthError("Not signed in: send 'Authorization: Bearer <token>' from POST /auth/token")
    subject = decode_access_token(token, secret_key=context.secret_key)
    user = session.get(User, int(subject)) if subject.isdigit() else None
    if user is None:
        raise AuthError("The token's user no longer exists; sign in again")
    return user


CurrentUser = Annotated[User, Depends(get_current_user)]


def require_admin(user: CurrentUser) -> User:
    if not user.is_admin:
        raise ForbiddenError("Only admins may do this")
    return user


AdminUser = Annotated[User, Depends(require_admin)]
