"""What every request with a body is checked for before a byte of the body is read.

FastAPI reads a body (and spools a multipart upload to /tmp) before it runs a route's
dependencies, so a 1 GiB upload with no token used to be written to disk before its 401.
This ASGI middleware runs first: a `Content-Length` over the limit is refused at once, a
request to a protected route without a valid token is refused before its body is read,
and a body sent without a length (chunked) is counted and cut at the limit.
"""

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import error_response
from app.core.errors import AuthError
from app.core.language import deferred, tr
from app.core.names import number_in_digits

BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
OPEN_PATHS = frozenset({"/auth/token"})  # bodies that need no token
FORM_ALLOWANCE = 64 * 1024  # a multipart body's boundaries and headers around the upload


class RequestGuard:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_upload_bytes: Callable[[], int],
        authenticate: Callable[[str], int],
    ) -> None:
        """A body may hold an upload of `max_upload_bytes()` and its form's framing;
        `authenticate(token)` returns the user's id or raises AuthError (a blocking call)."""
        self.app = app
        self.max_upload_bytes = max_upload_bytes
        self.authenticate = authenticate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        upload_limit = self.max_upload_bytes()
        limit = upload_limit + FORM_ALLOWANCE
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        length = headers.get("content-length")
        if length is not None and ((size := number_in_digits(length)) is None or size > limit):
            await self._refuse(scope, send, 413, _too_large(upload_limit))
            return
        if path not in OPEN_PATHS:
            scheme, _, token = headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not token:
                await self._refuse(scope, send, 401, tr(_NOT_SIGNED_IN))
                return
            try:
                user_id = await run_in_threadpool(self.authenticate, token.strip())
            except AuthError as exc:
                await self._refuse(scope, send, 401, exc.message)
                return
            scope.setdefault("state", {})["user_id"] = user_id
        await self.app(scope, _counted(receive, limit, upload_limit), send)

    @staticmethod
    async def _refuse(scope: Scope, send: Send, status: int, message: str) -> None:
        response = error_response(scope["path"], status, message)
        if status == 401:
            response.headers["WWW-Authenticate"] = "Bearer"
        # The body is left unread; the server closes the connection after this response.
        response.headers["Connection"] = "close"
        await response(scope, _nothing, send)


_NOT_SIGNED_IN = deferred("Not signed in: send 'Authorization: Bearer <token or API key>'")


def _too_large(upload_limit: int) -> str:
    """Said in the limit's own terms (QATUNE_MAX_UPLOAD_MB), not the body's with its framing."""
    return tr(
        "The request is over the {limit:g} MB limit; split the data or raise QATUNE_MAX_UPLOAD_MB",
        limit=round(upload_limit / 1024 / 1024, 3),
    )


def _counted(receive: Receive, limit: int, upload_limit: int) -> Callable[[], Awaitable[Message]]:
    seen = 0

    async def receive_counted() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise HTTPException(413, _too_large(upload_limit))
        return message

    return receive_counted


async def _nothing() -> Any:
    return {"type": "http.disconnect"}
