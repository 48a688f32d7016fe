"""/users: admins list, create, disable, reset and delete users."""

from fastapi import APIRouter, status

from app.api.deps import AccountsDep, AdminUser, ResourceId, SessionDep
from app.api.openapi import errors
from app.schemas.users import PasswordReset, UserCreate, UserOut, UserUpdate
from app.services.accounts import users as users_service

router = APIRouter(prefix="/users", tags=["users"])


@router.get("", responses=errors(403))
def list_users(_: AdminUser, session: SessionDep) -> list[UserOut]:
    return [UserOut.model_validate(u) for u in users_service.list_users(session)]


@router.post("", status_code=status.HTTP_201_CREATED, responses=errors(403, 409, 429))
async def create_user(
    body: UserCreate, admin: AdminUser, session: SessionDep, accounts: AccountsDep
) -> UserOut:
    user = await accounts.create_user(
        session, admin, username=body.username, password=body.password, is_admin=body.is_admin
    )
    return UserOut.model_validate(user)


@router.patch("/{user_id:int}", responses=errors(403, 409))
def update_user(
    user_id: ResourceId, body: UserUpdate, admin: AdminUser, session: SessionDep
) -> UserOut:
    """Disable a user (their sign-ins, tokens and API keys stop working at once), enable
    them again, or make or unmake an admin."""
    user = users_service.update_user(
        session, admin=admin, user_id=user_id, disabled=body.disabled, is_admin=body.is_admin
    )
    return UserOut.model_validate(user)


@router.post(
    "/{user_id:int}/password",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=errors(403, 409, 429),
)
async def reset_password(
    user_id: ResourceId,
    body: PasswordReset,
    admin: AdminUser,
    session: SessionDep,
    accounts: AccountsDep,
) -> None:
    """Set a user's password; the tokens they had stop working (their API keys stay)."""
    await accounts.reset_password(session, admin, user_id, body.new_password)


@router.delete("/{user_id:int}", status_code=status.HTTP_204_NO_CONTENT, responses=errors(403, 409))
def delete_user(
    user_id: ResourceId,
    admin: AdminUser,
    session: SessionDep,
    accounts: AccountsDep,
) -> None:
    """Delete a user with everything they own (keys, datasets, jobs and models, evals);
    a 409 while one of their jobs or eval runs is going."""
    accounts.delete_user(session, admin, user_id)
