"""/auth: sign in for a token (throttled), and who the token belongs to."""

import math
from typing import Annotated

from fastapi import APIRouter, Depends, Request, status
from fastapi.security import OAuth2PasswordRequestForm

from app.api.deps import CurrentUser, RuntimeDep, SessionDep
from app.api.openapi import errors
from app.core.errors import AuthError, TooManyRequests
from app.core.language import tr
from app.core.security import create_access_token
from app.schemas.users import PasswordChange, Token, UserOut
from app.services import users as users_service

router = APIRouter(prefix="/auth", tags=["auth"])


@router.post("/token", responses=errors(401, 429))
def issue_token(
    form: Annotated[OAuth2PasswordRequestForm, Depends()],
    request: Request,
    session: SessionDep,
    runtime: RuntimeDep,
) -> Token:
    """Sign in; repeated wrong passwords make the next try wait (429 with Retry-After)."""
    throttle = runtime.login_throttle
    address = request.client.host if request.client else "unknown"
    wait = throttle.wait_seconds(form.username, address)
    if wait > 0:
        raise TooManyRequests(
            tr("Too many failed sign-ins; try again in {seconds} s", seconds=math.ceil(wait)),
            retry_after=math.ceil(wait),
        )
    user = users_service.authenticate(session, username=form.username, password=form.password)
    if user is None:
        throttle.failed(form.username, address)
        raise AuthError(tr("Wrong username or password"))
    throttle.succeeded(form.username, address)
    minutes = runtime.settings.access_token_minutes
    token = create_access_token(
        subject=str(user.id), secret_key=runtime.secret_key, minutes=minutes
    )
    return Token(access_token=token, expires_in=minutes * 60)


@router.get("/me")
def me(user: CurrentUser) -> UserOut:
    return UserOut.model_validate(user)


@router.post("/password", status_code=status.HTTP_204_NO_CONTENT, responses=errors(401))
def change_password(
    body: PasswordChange, user: CurrentUser, session: SessionDep, runtime: RuntimeDep
) -> None:
    """Choose a new password; every token issued before it stops working (API keys stay)."""
    users_service.change_password(
        session,
        user=user,
        current=body.current_password,
        new=body.new_password,
        settings=runtime.settings,
    )
