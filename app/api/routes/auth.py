from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.security import OAuth2PasswordRequestForm

from app.api.deps import CurrentUser, RuntimeDep, SessionDep
from app.core.errors import AuthError
from app.core.security import create_access_token
from app.schemas.users import Token, UserOut
from app.services import users as users_service

router = APIRouter(prefix="/auth", tags=["auth"])


@router.post("/token")
def issue_token(
    form: Annotated[OAuth2PasswordRequestForm, Depends()], session: SessionDep, runtime: RuntimeDep
) -> Token:
    user = users_service.authenticate(session, username=form.username, password=form.password)
    if user is None:
        raise AuthError("Wrong username or password")
    minutes = runtime.settings.access_token_minutes
    token = create_access_token(
        subject=str(user.id), secret_key=runtime.secret_key, minutes=minutes
    )
    return Token(access_token=token, expires_in=minutes * 60)


@router.get("/me")
def me(user: CurrentUser) -> UserOut:
    return UserOut.model_validate(user)
