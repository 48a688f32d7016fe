"""/auth: sign in for a token (throttled), and who the token belongs to."""

from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request, status
from fastapi.security import OAuth2PasswordRequestForm

from app.api.deps import AccountsDep, CurrentUser, SessionDep
from app.api.openapi import errors
from app.schemas.users import PasswordChange, Token, UserOut

router = APIRouter(prefix="/auth", tags=["auth"])


@router.post("/token", responses=errors(401, 429))
async def issue_token(
    form: Annotated[OAuth2PasswordRequestForm, Depends()],
    request: Request,
    session: SessionDep,
    accounts: AccountsDep,
    challenge: Annotated[str | None, Form(max_length=100)] = None,
    proof: Annotated[str | None, Form(max_length=20)] = None,
) -> Token:
    """Sign in. Repeated wrong passwords from one place make its next try wait (429 with
    Retry-After); many for one account make each sign-in for it carry a proof of work
    (429 with the challenge in X-Qatune-Challenge; docs/api.md#signing-in). The password is
    checked in a queue of its own (app/core/password_work.py): 429 when it is full."""
    signed_in = await accounts.sign_in(
        session,
        username=form.username,
        password=form.password,
        address=request.client.host if request.client else "unknown",
        challenge=challenge,
        proof=proof,
    )
    return Token(access_token=signed_in.token, expires_in=signed_in.expires_in)


@router.get("/me")
def me(user: CurrentUser) -> UserOut:
    return UserOut.model_validate(user)


@router.post("/password", status_code=status.HTTP_204_NO_CONTENT, responses=errors(401, 429))
async def change_password(
    body: PasswordChange,
    user: CurrentUser,
    session: SessionDep,
    accounts: AccountsDep,
    request: Request,
) -> None:
    """Choose a new password; every token issued before it stops working (API keys stay)."""
    await accounts.change_password(
        session,
        user,
        current=body.current_password,
        new=body.new_password,
        address=request.client.host if request.client else "unknown",
    )
