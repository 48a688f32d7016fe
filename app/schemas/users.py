"""Users as the API takes and shows them: a new user (its password checked for strength), a
user."""

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.core.security import password_problem


class Token(BaseModel):
    access_token: str
    token_type: str = "bearer"
    expires_in: int


class UserCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    username: str = Field(min_length=3, max_length=64, pattern=r"^[A-Za-z0-9_.@-]+$")
    password: str = Field(min_length=8, max_length=256)
    is_admin: bool = False

    @model_validator(mode="after")
    def _strong_password(self) -> "UserCreate":
        problem = password_problem(self.password, username=self.username)
        if problem:
            raise ValueError(problem)
        return self


class PasswordChange(BaseModel):
    model_config = ConfigDict(extra="forbid")

    current_password: str = Field(min_length=1, max_length=256)
    new_password: str = Field(min_length=8, max_length=256)


class UserUpdate(BaseModel):
    """What an admin changes about another user; a field left out stays as it is."""

    model_config = ConfigDict(extra="forbid", strict=True)  # 0 or "no" is not a yes or no

    disabled: bool | None = Field(
        default=None,
        description="true: their sign-ins, tokens and API keys stop working at once",
    )
    is_admin: bool | None = None


class PasswordReset(BaseModel):
    """An admin sets a user's password; every token the user had stops working."""

    model_config = ConfigDict(extra="forbid")

    new_password: str = Field(min_length=8, max_length=256)


class UserOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    username: str
    is_admin: bool
    disabled: bool
    created_at: datetime
