"""Typed dependencies every route takes: the session, the current user, the runtime, and
each domain's face (accounts, serving, jobs, datasets, evals and graders, exports)."""

import hmac
from collections.abc import Awaitable, Callable, Iterator
from typing import Annotated, TypeVar

from fastapi import Depends, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.security import OAuth2PasswordBearer
from sqlalchemy.orm import Session

from app.api.guard import BODY_METHODS
from app.core.errors import AuthError, ForbiddenError
from app.core.json_text import NOT_UNICODE, lone_surrogate_at, might_hold_a_surrogate
from app.core.language import tr
from app.db.models import User
from app.runtime import Runtime
from app.schemas.common import MAX_JSON_INT
from app.services.accounts import auth as auth_service
from app.services.accounts.face import Accounts
from app.services.datasets.face import Datasets
from app.services.evals.face import Evals
from app.services.evals.graders import Graders
from app.services.exports.exporter import Exporter
from app.services.jobs.face import Jobs
from app.services.serving.queries import Serving

oauth2_scheme = OAuth2PasswordBearer(tokenUrl="/auth/token", auto_error=False)
# Ids are at most the largest integer JSON keeps exactly (2^53 - 1; the database's own
# limit, 2^63 - 1, reads as a float to many clients): a larger one is a 422, not a 500.
MAX_ID = MAX_JSON_INT
ResourceId = Annotated[int, Path(ge=1, le=MAX_ID)]
Face = TypeVar("Face")


async def json_text_is_unicode(request: Request) -> None:
    """Every route's JSON body, refused where it holds a lone surrogate (JSON's "\\ud800"):
    a 422 (400 under /v1) naming the field, before a route stores, answers or tokenizes
    it. FastAPI parsed the body already; a body that is not JSON is the route's to refuse.
    Only a body that could hold one is walked, off the event loop."""
    if request.method not in BODY_METHODS:
        return  # a body the guard neither counts nor caps, which no route reads
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if not (
        media == "application/json" or media.startswith("application/") and media.endswith("+json")
    ):
        return  # FastAPI reads only these as JSON (a form's stream is read once, and gone)
    if not might_hold_a_surrogate(await request.body()):
        return
    try:
        body = await request.json()
    except ValueError:
        return
    if (at := await run_in_threadpool(lone_surrogate_at, body)) is not None:
        error = {"type": "value_error", "loc": ("body", *at), "msg": tr(NOT_UNICODE), "input": None}
        raise RequestValidationError([error])


async def get_runtime(request: Request) -> Runtime:  # on the loop: no thread for a lookup
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def face(read: Callable[[Runtime], Face]) -> Callable[[Runtime], Awaitable[Face]]:
    """A dependency that hands a route one part the runtime built once (`read` picks it)."""

    async def part(runtime: RuntimeDep) -> Face:
        return read(runtime)

    return part


ServingDep = Annotated[Serving, Depends(face(lambda runtime: runtime.serving))]
# A domain's face: what its routes call, instead of reaching through the runtime.
AccountsDep = Annotated[Accounts, Depends(face(lambda runtime: runtime.accounts))]
JobsDep = Annotated[Jobs, Depends(face(lambda runtime: runtime.jobs))]
DatasetsDep = Annotated[Datasets, Depends(face(lambda runtime: runtime.datasets))]
EvalsDep = Annotated[Evals, Depends(face(lambda runtime: runtime.evals))]
GradersDep = Annotated[Graders, Depends(face(lambda runtime: runtime.graders))]
ExporterDep = Annotated[Exporter, Depends(face(lambda runtime: runtime.exporter))]


def get_session(runtime: RuntimeDep) -> Iterator[Session]:
    with runtime.database.session() as session:
        yield session


# scope="function": commit before the response is sent. FastAPI's default ends a yield
# dependency after the response, so a client could read right after a 201 and not find
# what it created, or get a 201 for a commit that then failed.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


def get_current_user(
    request: Request,
    runtime: RuntimeDep,
    session: SessionDep,
    token: Annotated[str | None, Depends(oauth2_scheme)],
) -> User:
    """The bearer's user: a JWT from POST /auth/token or an API key (`qk-…`)."""
    vouched = request.scope.get("state", {}).get("user_id")  # set by RequestGuard
    user = session.get(User, vouched) if vouched is not None else None
    if user is None:
        if not token:
            raise AuthError(
                tr(
                    "Not signed in: send 'Authorization: Bearer <token or API key>' (a token "
                    "from POST /auth/token, a key from POST /api-keys)"
                )
            )
        user = auth_service.user_for_token(session, token, secret_key=runtime.secret_key)
    # The route runs in another hop to the thread pool: no pooled connection is held while
    # it waits for one. Else requests holding every connection wait for threads, and the
    # threads wait for a connection, until the pool's timeout (PostgreSQL's pool is small).
    session.commit()
    return user


CurrentUser = Annotated[User, Depends(get_current_user)]


def require_admin(user: CurrentUser) -> User:
    if not user.is_admin:
        raise ForbiddenError(tr("Only admins may do this"))
    return user


AdminUser = Annotated[User, Depends(require_admin)]


def require_operator(
    request: Request,
    runtime: RuntimeDep,
    session: SessionDep,
    token: Annotated[str | None, Depends(oauth2_scheme)],
) -> None:
    """GET /metrics and /ready: QATUNE_METRICS_TOKEN (what Prometheus and probes send), or
    an admin's token or API key."""
    scrape = runtime.settings.metrics_token
    if scrape and token and hmac.compare_digest(token.encode(), scrape.get_secret_value().encode()):
        return
    require_admin(get_current_user(request, runtime, session, token))


Operator = Depends(require_operator)
