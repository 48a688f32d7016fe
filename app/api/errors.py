"""One place that turns errors into HTTP responses.

The native API answers `{"detail", "errors": [{"field" or "line", "message"}]}`; the
OpenAI API under /v1 answers `{"error": {"message", "type", "param", "code"}}` with
`x-should-retry: false` where a retry cannot help (the openai client retries 409 and 5xx
otherwise). Every handler goes through `error_response`, so the shape follows the path.
"""

import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from loguru import logger
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.api.validation_words import documented, explain, sentence
from app.core.disk import disk_full, is_no_space
from app.core.errors import BadRequest, QatuneError, TooManyRequests
from app.core.language import deferred, tr
from app.db.session import is_busy
from app.ml.models import ModelUnavailable
from app.ml.serving.requests import (
    AdapterNotServed,
    BackendUnavailable,
    GenerationFailed,
    PromptTooLong,
    QueueFull,
)
from app.ml.training.adapter_metadata import AdapterInvalid

OPENAI_PREFIX = "/v1/"
RETRY_HELPS = frozenset({408, 429, 500, 502, 503, 504})
OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}
OPENAI_CODES = {401: "invalid_api_key", 404: "not_found", 413: "request_too_large"}
# FastAPI's words for a body it could not parse, and ours (templates: tr() at answer time).
UNREADABLE_BODY = {
    "There was an error parsing the body": deferred(
        "The body could not be read: send UTF-8 JSON with 'Content-Type: application/json'"
    ),
    "Invalid multipart data.": deferred(
        "The multipart body is broken; send the file as form field 'file' (curl -F file=@qa.jsonl)"
    ),
}
# What to send for a missing field whose name alone does not say it.
MISSING_HINTS = {
    "file": deferred("send the file as multipart form field 'file' (curl -F file=@qa.jsonl)"),
}


class ErrorJSON(JSONResponse):
    """An error's JSON, which may quote what was sent: a lone surrogate (JSON's "\\ud800",
    which UTF-8 cannot carry) is written escaped, as JSON allows, instead of failing."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(content, allow_nan=False, separators=(",", ":")).encode()


def error_response(
    path: str,
    status: int,
    message: str,
    errors: list[dict[str, Any]] | None = None,
    *,
    param: str | None = None,
) -> JSONResponse:
    if path.startswith(OPENAI_PREFIX):
        body = {
            "error": {
                "message": message,
                "type": OPENAI_TYPES.get(status, "server_error" if status >= 500 else "error"),
                "param": param or _first_field(errors),
                "code": OPENAI_CODES.get(status),
            }
        }
        response = ErrorJSON(body, status_code=status)
        if status not in RETRY_HELPS:
            response.headers["x-should-retry"] = "false"
        return response
    return ErrorJSON({"detail": message, "errors": errors or []}, status_code=status)


def _first_field(errors: list[dict[str, Any]] | None) -> str | None:
    for error in errors or []:
        if error.get("field"):
            return str(error["field"])
    return None


def _methods_of(request: Request, exc: StarletteHTTPException) -> list[str]:
    """Every method the path takes, not just one route's (as Starlette's 405 says); an
    undocumented path (the UI's files) has Starlette's."""
    found = documented(request.app.openapi(), request.url.path)
    methods = {method.upper() for method in found[0]} if found else set()  # its own template
    allowed = (exc.headers or {}).get("Allow", "")
    return sorted(methods or {method.strip() for method in allowed.split(",") if method.strip()})


async def domain_error(request: Request, exc: QatuneError) -> JSONResponse:
    param = exc.param if isinstance(exc, BadRequest) else None
    response = error_response(
        request.url.path, exc.status_code, exc.message, exc.details, param=param
    )
    if exc.status_code == 401:
        response.headers["WWW-Authenticate"] = "Bearer"
    if isinstance(exc, TooManyRequests):
        response.headers["Retry-After"] = str(exc.retry_after)
        response.headers.update(exc.headers)
    return response


async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    raw = exc.errors()
    errors = explain(request.app.openapi(), request.url.path, request.method, raw)
    for field, hint in MISSING_HINTS.items():
        if field in errors and errors[field].startswith(tr("is missing")):
            errors[field] = tr("is missing: {hint}", hint=tr(hint))
    summary = tr("; ").join(sentence(field, problem) for field, problem in list(errors.items())[:5])
    path = request.url.path
    # A body under /v1 that does not validate is OpenAI's 400, as its clients expect (a
    # query parameter stays a 422, as it has always been).
    in_body = any(error.get("loc", ("",))[0] == "body" for error in raw)
    status = 400 if in_body and path.startswith(OPENAI_PREFIX) else 422
    return error_response(
        request.url.path,
        status,
        tr("Invalid request: {summary}", summary=summary),
        [{"field": f, "message": m} for f, m in errors.items()],
    )


async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    detail = str(exc.detail)
    message = tr(UNREADABLE_BODY[detail]) if detail in UNREADABLE_BODY else detail
    methods: list[str] = []  # every method of the path, not just one route's
    if exc.status_code == 405:
        methods = _methods_of(request, exc)
        message = tr(
            "{path} does not take {method}; use {methods}",
            path=request.url.path[:200],
            method=request.method[:20],
            methods=", ".join(methods),
        )
    elif exc.status_code == 404 and detail == "Not Found":  # no route: Starlette's words
        message = _nothing_at(request)
    response = error_response(request.url.path, exc.status_code, message)
    for name, value in (exc.headers or {}).items():
        response.headers[name] = value
    if methods:
        response.headers["Allow"] = ", ".join(methods)
    return response


def _nothing_at(request: Request) -> str:
    """What a path that leads nowhere is told: under /v1, the part of OpenAI's API served
    here (a script written for its Responses or Embeddings API learns it is not)."""
    path = request.url.path[:200]
    if not path.startswith(OPENAI_PREFIX):
        return tr("Nothing is at {path}; GET /docs lists qatune's API", path=path)
    paths: dict[str, list[str]] = {}  # /v1/files: its endpoints' paths
    for route_path in request.app.openapi().get("paths", {}):
        if route_path.startswith(OPENAI_PREFIX):
            paths.setdefault("/".join(route_path.split("/")[:3]), []).append(route_path)
    # a part of the API with one path is named by it (/v1/chat/completions, not /v1/chat)
    served = sorted(under[0] if len(under) == 1 else part for part, under in paths.items())
    return tr(
        "qatune does not serve {path}: of OpenAI's API it serves {served} (GET /docs lists "
        "every endpoint)",
        path=path,
        served=", ".join(served),
    )


async def conflict(request: Request, exc: IntegrityError) -> JSONResponse:
    return error_response(
        request.url.path, 409, tr("That conflicts with existing data; reload and try again")
    )


async def model_unavailable(request: Request, exc: ModelUnavailable) -> JSONResponse:
    return error_response(request.url.path, 503, str(exc))


async def adapter_invalid(request: Request, exc: AdapterInvalid) -> JSONResponse:
    return error_response(request.url.path, 409, tr("{problem}; retrain the job", problem=exc))


async def queue_full(request: Request, exc: QueueFull) -> JSONResponse:
    response = error_response(request.url.path, 429, str(exc))
    response.headers["Retry-After"] = str(exc.retry_after)
    return response


async def prompt_too_long(request: Request, exc: PromptTooLong) -> JSONResponse:
    return error_response(request.url.path, 400, str(exc))


async def generation_failed(request: Request, exc: GenerationFailed) -> JSONResponse:
    response = error_response(
        request.url.path, 503, tr("Generation failed: {problem}", problem=exc)
    )
    response.headers["Retry-After"] = "5"
    return response


async def backend_unavailable(request: Request, exc: BackendUnavailable) -> JSONResponse:
    message = tr("The model's servers are not ready: {problem}", problem=exc)
    response = error_response(request.url.path, 503, message)
    response.headers["Retry-After"] = str(exc.retry_after)
    return response


async def adapter_not_served(request: Request, exc: AdapterNotServed) -> JSONResponse:
    message = tr("The model cannot be served: {problem}", problem=exc)
    return error_response(request.url.path, 409, message)


async def unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.opt(exception=exc).error("Unhandled error on {} {}", request.method, request.url)
    return error_response(
        request.url.path, 500, tr("Internal error; it has been logged on the server")
    )


def no_space(request: Request) -> JSONResponse:
    logger.warning(
        "Refused {} {}: the data directory's disk is full", request.method, request.url.path
    )
    full = disk_full(request.app.state.runtime.settings.data_dir)
    message = tr("Nothing was saved: {problem}; free space and retry", problem=full.text())
    return error_response(request.url.path, 507, message)


async def os_error(request: Request, exc: OSError) -> JSONResponse:
    return no_space(request) if is_no_space(exc) else await unexpected(request, exc)


async def database_busy(request: Request, exc: OperationalError) -> JSONResponse:
    if is_no_space(exc):  # SQLite: "database or disk is full"
        return no_space(request)
    if not is_busy(exc):  # SQLite's busy timeout ran out; others are bugs
        return await unexpected(request, exc)
    message = tr("The database is busy with another write; nothing was saved, try again")
    return _database_unavailable(request, message)


async def no_free_connection(request: Request, exc: PoolTimeout) -> JSONResponse:
    """Every pooled connection stayed in use for the pool's timeout: a load, not a bug."""
    logger.warning("No database connection free for {}: {}", request.url.path, exc)
    message = tr("The database has no free connection for now; nothing was saved, try again")
    return _database_unavailable(request, message)


def _database_unavailable(request: Request, message: str) -> JSONResponse:
    """A 503 for a moment's load: nothing was saved, and a retry soon may go through."""
    response = error_response(request.url.path, 503, message)
    response.headers["Retry-After"] = "2"
    return response


# Each error type's handler; FastAPI picks the most specific class an error is.
HANDLERS: dict[type[Exception], Any] = {
    QatuneError: domain_error,
    RequestValidationError: invalid_request,
    StarletteHTTPException: http_error,
    IntegrityError: conflict,
    ModelUnavailable: model_unavailable,
    AdapterInvalid: adapter_invalid,
    QueueFull: queue_full,
    PromptTooLong: prompt_too_long,
    GenerationFailed: generation_failed,
    BackendUnavailable: backend_unavailable,
    AdapterNotServed: adapter_not_served,
    Exception: unexpected,
    OSError: os_error,
    OperationalError: database_busy,
    PoolTimeout: no_free_connection,
}


def install_error_handlers(app: FastAPI) -> None:
    """Domain errors raised anywhere become one JSON shape with the right status here."""
    for kind, handler in HANDLERS.items():
        app.add_exception_handler(kind, handler)
