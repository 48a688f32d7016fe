"""Users: sign-in, creation, the first admin, and what admins do to other users (disable,
reset a password, delete with everything they own)."""

import shutil
from collections.abc import Callable

from loguru import logger
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core import security
from app.core.config import Settings
from app.core.errors import AuthError, ConflictError, NotFoundError, ValidationFailed
from app.core.language import tr
from app.core.storage import Storage
from app.db.base import utcnow
from app.db.models import Dataset, EvalRun, Job, User
from app.jobs.status import JobStatus

ADMIN_PASSWORD_FILE = "admin_password"


def authenticate(session: Session, *, username: str, password: str) -> User | None:
    """The user, if the password is theirs; AuthError if an admin disabled them."""
    user = session.scalar(select(User).where(User.username == username))
    # verify_password runs even for unknown users, so timing does not reveal who exists.
    ok = security.verify_password(password, user.password_hash if user else None)
    if ok and user and user.disabled:
        raise AuthError(disabled_message())
    return user if ok and user else None


def disabled_message() -> str:
    return tr("This account is disabled; an administrator can enable it again")


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
    _set_password(user, new, settings)


def _set_password(user: User, new: str, settings: Settings) -> None:
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


# ------------------------------------------------------------------ what admins do
def get_user(session: Session, user_id: int) -> User:
    user = session.get(User, user_id)
    if user is None:
        raise NotFoundError(tr("User {user_id} not found; GET /users lists them", user_id=user_id))
    return user


def update_user(
    session: Session, *, admin: User, user_id: int, disabled: bool | None, is_admin: bool | None
) -> User:
    """Disable or enable a user (at once: every request checks), make or unmake an admin."""
    user = get_user(session, user_id)
    if user.id == admin.id and (disabled or is_admin is False):
        raise ConflictError(
            tr("You cannot disable yourself or take your own admin rights; ask another admin")
        )
    if disabled is not None:
        user.disabled_at = (user.disabled_at or utcnow()) if disabled else None
    if is_admin is not None:
        user.is_admin = is_admin
    session.flush()
    return user


def reset_password(
    session: Session, *, admin: User, user_id: int, new: str, settings: Settings
) -> User:
    """A new password an admin chose: the user's tokens stop working (API keys stay; disable
    the user to stop those too)."""
    user = get_user(session, user_id)
    if user.id == admin.id:  # a stolen token must not lock the owner out
        raise ConflictError(
            tr("Change your own password with POST /auth/password, which asks for the current one")
        )
    _set_password(user, new, settings)
    session.flush()
    logger.info("{} reset the password of {}", admin.username, user.username)
    return user


def delete_user(
    session: Session,
    *,
    admin: User,
    user_id: int,
    storage: Storage,
    forget: Callable[[Job], None],
) -> User:
    """The user and all they own: keys, datasets, jobs (their models forgotten wherever
    served, with `forget`), evals and runs, kept base answers. Not while something of
    theirs runs: that is a 409 naming it."""
    user = get_user(session, user_id)
    if user.id == admin.id:
        raise ConflictError(tr("You cannot delete yourself; ask another admin"))
    running = session.scalar(
        select(Job.id).where(Job.owner_id == user.id, Job.status == JobStatus.RUNNING)
    )
    if running is not None:
        raise ConflictError(
            tr(
                "Job {job_id} of {username} is running: cancel it first (POST "
                "/jobs/{job_id}/cancel), or disable the user now and delete them after",
                job_id=running,
                username=user.username,
            )
        )
    if (
        session.scalar(
            select(EvalRun.id)
            .where(EvalRun.owner_id == user.id)
            .where(EvalRun.status.in_(("queued", "in_progress")))
        )
        is not None
    ):
        raise ConflictError(
            tr("An eval run of {username} is still going: cancel it first", username=user.username)
        )
    jobs = list(session.scalars(select(Job).where(Job.owner_id == user.id)))
    datasets = list(session.scalars(select(Dataset).where(Dataset.owner_id == user.id)))
    session.delete(user)  # keys, datasets, jobs and their events, evals: by cascade
    session.flush()
    for job in jobs:
        storage.remove_job_files(job.storage_key)
        forget(job)
    for dataset in datasets:
        storage.dataset_file(dataset.storage_key).unlink(missing_ok=True)
        storage.dataset_original(dataset.storage_key).unlink(missing_ok=True)
    shutil.rmtree(storage.base_answers_dir(str(user.id)), ignore_errors=True)
    logger.info(
        "{} deleted user {} with {} job(s) and {} dataset(s)",
        admin.username,
        user.username,
        len(jobs),
        len(datasets),
    )
    return user


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
