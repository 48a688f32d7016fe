"""Users: sign-in, creation, and the first admin."""

from loguru import logger
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core import security
from app.core.config import Settings
from app.core.errors import AuthError, ConflictError, ValidationFailed
from app.core.language import tr
from app.db.base import utcnow
from app.db.models import User

ADMIN_PASSWORD_FILE = "admin_password"


def authenticate(session: Session, *, username: str, password: str) -> User | None:
    user = session.scalar(select(User).where(User.username == username))
    # verify_password runs even for unknown users, so timing does not reveal who exists.
    ok = security.verify_password(password, user.password_hash if user else None)
    return user if ok and user else None


def create_user(session: Session, *, username: str, password: str, is_admin: bool = False) -> User:
    if session.scalar(select(User).where(User.username == username)):
        raise ConflictError(
            tr("User {username!r} already exists; choose another username", username=username)
        )
    user = User(
        username=username, password_hash=security.hash_password(password), is_admin=is_admin
    )
    session.add(user)
    session.flush()
    return user


def change_password(
    session: Session, *, user: User, current: str, new: str, settings: Settings
) -> None:
    """Every token issued before now stops working; the first admin's saved password goes."""
    if not security.verify_password(current, user.password_hash):
        raise AuthError(tr("The current password is wrong"))
    problem = security.password_problem(new, username=user.username)
    if problem:
        raise ValidationFailed(
            problem[:1].upper() + problem[1:],
            details=[{"field": "new_password", "message": problem}],
        )
    user.password_hash = security.hash_password(new)
    user.password_changed_at = utcnow()
    saved = settings.data_dir / ADMIN_PASSWORD_FILE
    if user.username == settings.admin_username and saved.exists():
        saved.unlink()
        logger.info("Removed {}: the admin has chosen a password", saved)


def list_users(session: Session) -> list[User]:
    return list(session.scalars(select(User).order_by(User.id)))


def ensure_first_admin(session: Session, settings: Settings) -> None:
    """Create the admin on first start; a generated password is printed once and kept 0600."""
    if session.scalar(select(func.count()).select_from(User)):
        return
    if settings.admin_password is not None:
        password = settings.admin_password.get_secret_value()  # checked by Settings
        source = "QATUNE_ADMIN_PASSWORD"
    else:
        password = security.generate_password()
        path = settings.data_dir / ADMIN_PASSWORD_FILE
        security.write_private_file(path, password + "\n")
        source = f"generated; also saved in {path} (mode 0600)"
        # Printed once, on purpose: the person starting the service needs it to sign in.
        print(  # noqa: T201
            f"\n  qatune: created admin user {settings.admin_username!r} with password "
            f"{password}\n  ({source})\n",
            flush=True,
        )
    create_user(session, username=settings.admin_username, password=password, is_admin=True)
    logger.info("Created the first admin {!r} (password {})", settings.admin_username, source)
