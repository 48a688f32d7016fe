"""What the routes do with accounts that needs the process's parts, wired in once: every
password checked or hashed waits in the one password queue (app/core/password_work.py),
sign-ins are throttled and, for an account under attack, carry a proof of work."""

import math
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.errors import AuthError, TooManyRequests
from app.core.language import tr
from app.core.password_work import PasswordWork
from app.core.proof_of_work import Proofs
from app.core.security import create_access_token
from app.core.storage import Storage
from app.core.throttle import LoginThrottle
from app.db.models import Job, User
from app.services.accounts import users


@dataclass(frozen=True)
class SignedIn:
    token: str
    expires_in: int  # seconds


@dataclass(frozen=True)
class Accounts:
    settings: Settings
    storage: Storage
    secret_key: str
    password_work: PasswordWork
    throttle: LoginThrottle
    proofs: Proofs
    forget: Callable[[Job], None]  # a deleted user's models leave serving and exports

    async def sign_in(
        self,
        session: Session,
        *,
        username: str,
        password: str,
        address: str,
        challenge: str | None,
        proof: str | None,
    ) -> SignedIn:
        """A token; or 429 while this place must wait or this account needs a proof of
        work (the challenge in X-Qatune-Challenge), or 401 for a wrong password."""
        wait = self.throttle.wait_seconds(username, address)
        if wait > 0:
            raise TooManyRequests(
                tr("Too many failed sign-ins; try again in {seconds} s", seconds=math.ceil(wait)),
                retry_after=math.ceil(wait),
            )
        bits = self.throttle.work_needed(username)
        if bits and not (challenge and proof and self.proofs.accept(username, challenge, proof)):
            raise TooManyRequests(
                tr(
                    "Many wrong passwords were tried for this account lately, so each sign-in "
                    "for it carries a proof of work (the admin UI does it by itself): find a "
                    "number N such that SHA-256 of '<challenge>:N' starts with {bits} zero "
                    "bits, and send the X-Qatune-Challenge header's value as `challenge` and N "
                    "as `proof`",
                    bits=bits,
                ),
                retry_after=0,
                headers={
                    "X-Qatune-Challenge": self.proofs.issue(username, bits),
                    "X-Qatune-Work-Bits": str(bits),
                },
            )
        user = await self.password_work.run(
            address, users.authenticate, session, username=username, password=password
        )
        if user is None:
            self.throttle.failed(username, address)
            raise AuthError(tr("Wrong username or password"))
        self.throttle.succeeded(username, address)
        minutes = self.settings.access_token_minutes
        token = create_access_token(
            subject=str(user.id), secret_key=self.secret_key, minutes=minutes
        )
        return SignedIn(token, minutes * 60)

    async def change_password(
        self, session: Session, user: User, *, current: str, new: str, address: str
    ) -> None:
        await self.password_work.run(
            address,
            users.change_password,
            session,
            user=user,
            current=current,
            new=new,
            settings=self.settings,
        )

    async def create_user(
        self, session: Session, admin: User, *, username: str, password: str, is_admin: bool
    ) -> User:
        return await self.password_work.run(
            f"user:{admin.id}",  # hashing, like a sign-in's check, waits in the password queue
            users.create_user,
            session,
            username=username,
            password=password,
            is_admin=is_admin,
        )

    async def reset_password(self, session: Session, admin: User, user_id: int, new: str) -> None:
        await self.password_work.run(
            f"user:{admin.id}",
            users.reset_password,
            session,
            admin=admin,
            user_id=user_id,
            new=new,
            settings=self.settings,
        )

    def delete_user(self, session: Session, admin: User, user_id: int) -> None:
        users.delete_user(
            session, admin=admin, user_id=user_id, storage=self.storage, forget=self.forget
        )
