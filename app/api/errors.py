"""One place that turns errors into HTTP responses: `{"detail", "errors"}` with a status."""

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from loguru import logger
from sqlalchemy.exc import IntegrityError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.core.errors import QatuneError, TooManyRequests
from app.ml.models import ModelUnavailable
from app.ml.training.adapter_files import AdapterInvalid


def _error(status: int, detail: str, errors: list[dict[str, Any]] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail, "errors": errors or []}, status_code=status)


def _field(loc: tuple[Any, ...]) -> str:
    # Drop "body" and pydantic's union-branch tags so the field reads as the user wrote it.
    parts = [str(p) for p in loc if p != "body" and not str(p).startswith(("literal[", "list["))]
    parts = [p for p in parts if p not in ("int", "float", "constrained-int")]
    return ".".join(parts) or "body"


def install_error_handlers(app: FastAPI) -> None:
    """Domain errors raised anywhere become one JSON shape with the right status here."""

    @app.exception_handler(QatuneError)
    async def domain_error(_: Request, exc: QatuneError) -> JSONResponse:
        response = _error(exc.status_code, exc.message, exc.details)
        if exc.status_code == 401:
            response.headers["WWW-Authenticate"] = "Bearer"
        if isinstance(exc, TooManyRequests):
            response.headers["Retry-After"] = str(exc.retry_after)
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors: dict[str, str] = {}
        for error in exc.errors():
            errors.setdefault(_field(error["loc"]), error["msg"])
        summary = "; ".join(f"{field}: {msg}" for field, msg in list(errors.items())[:5])
        return _error(
            422,
            f"Invalid request — {summary}",
            [{"field": f, "message": m} for f, m in errors.items()],
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(IntegrityError)
    async def conflict(_: Request, exc: IntegrityError) -> JSONResponse:
        return _error(409, "That conflicts with existing data; reload and try again")

    @app.exception_handler(ModelUnavailable)
    async def model_unavailable(_: Request, exc: ModelUnavailable) -> JSONResponse:
        return _error(503, str(exc))

    @app.exception_handler(AdapterInvalid)
    async def adapter_invalid(_: Request, exc: AdapterInvalid) -> JSONResponse:
        return _error(409, f"{exc}; retrain the job")

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.opt(exception=exc).error("Unhandled error on {} {}", request.method, request.url)
        return _error(500, "Internal error; it has been logged on the server")

    @app.exception_handler(OperationalError)
    async def database_busy(request: Request, exc: OperationalError) -> JSONResponse:
        if "locked" not in str(exc.orig):  # SQLite's busy timeout ran out; others are bugs
            return await unexpected(request, exc)
        response = _error(
            503, "The database is busy with another write; nothing was saved, try again"
        )
        response.headers["Retry-After"] = "2"
        return response
