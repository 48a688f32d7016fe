"""/users: admins list and create users."""

from fastapi import APIRouter, status

from app.api.deps import AdminUser, SessionDep
from app.api.openapi import errors
from app.schemas.users import UserCreate, UserOut
from app.services import users as users_service

router = APIRouter(prefix="/users", tags=["users"])


@router.get("", responses=errors(403))
def list_users(_: AdminUser, session: SessionDep) -> list[UserOut]:
    return [UserOut.model_validate(u) for u in users_service.list_users(session)]


@router.post("", status_code=status.HTTP_201_CREATED, responses=errors(403, 409))
def create_user(body: UserCreate, _: AdminUser, session: SessionDep) -> UserOut:
    user = users_service.create_user(
        session, username=body.username, password=body.password, is_admin=body.is_admin
    )
    return UserOut.model_validate(user)
