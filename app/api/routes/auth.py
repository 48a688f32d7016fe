"""/auth: sign in for a token (throttled), and who the token belongs to."""

import math
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request, status
from fastapi.security import OAuth2PasswordRequestForm

from app.api.deps import CurrentUser, RuntimeDep, SessionDep
from app.api.openapi import errors
from app.core.errors import AuthError, TooManyRequests
from app.core.language import tr
from app.core.security import create_access_token
from app.schemas.users import PasswordChange, Token, UserOut
from app.services.accounts import users as users_service

router = APIRouter(prefix="/auth", tags=["auth"])


@router.post("/token", responses=errors(401, 429))
async def issue_token(
    form: Annotated[OAuth2PasswordRequestForm, Depends()],
    request: Request,
    session: SessionDep,
    runtime: RuntimeDep,
    challenge: Annotated[str | None, Form(max_length=100)] = None,
    proof: Annotated[str | None, Form(max_length=20)] = None,
) -> Token:
    """Sign in. Repeated wrong passwords from one place make its next try wait (429 with
    Retry-After); many for one account make each sign-in for it carry a proof of work
    (429 with the challenge in X-Qatune-Challenge; docs/api.md#signing-in). The password is
    checked in a queue of its own (app/core/password_work.py): 429 when it is full."""
    throttle = runtime.login_throttle
    address = request.client.host if request.client else "unknown"
    wait = throttle.wait_seconds(form.username, address)
    if wait > 0:
        raise TooManyRequests(
            tr("Too many failed sign-ins; try again in {seconds} s", seconds=math.ceil(wait)),
            retry_after=math.ceil(wait),
        )
    bits = throttle.work_needed(form.username)
    proofs = runtime.sign_in_proofs
    if bits and not (challenge and proof and proofs.accept(form.username, challenge, proof)):
        raise TooManyRequests(
            tr(
                "Many wrong passwords were tried for this account lately, so each sign-in for "
                "it carries a proof of work (the admin UI does it by itself): find a number N "
                "such that SHA-256 of '<challenge>:N' starts with {bits} zero bits, and send "
                "the X-Qatune-Challenge header's value as `challenge` and N as `proof`",
                bits=bits,
            ),
            retry_after=0,
            headers={
                "X-Qatune-Challenge": proofs.issue(form.username, bits),
                "X-Qatune-Work-Bits": str(bits),
            },
        )
    user = await runtime.password_work.run(
        address,
        users_service.authenticate,
        session,
        username=form.username,
        password=form.password,
    )
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


@router.post("/password", status_code=status.HTTP_204_NO_CONTENT, responses=errors(401, 429))
async def change_password(
    body: PasswordChange,
    user: CurrentUser,
    session: SessionDep,
    runtime: RuntimeDep,
    request: Request,
) -> None:
    """Choose a new password; every token issued before it stops working (API keys stay)."""
    await runtime.password_work.run(
        request.client.host if request.client else "unknown",
        users_service.change_password,
        session,
        user=user,
        current=body.current_password,
        new=body.new_password,
        settings=runtime.settings,
    )
