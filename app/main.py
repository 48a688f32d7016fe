"""create_app(): routers, error handlers, and the lifespan that wires everything together."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from loguru import logger
from sqlalchemy.exc import IntegrityError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.api.context import AppContext
from app.api.deps import get_current_user
from app.api.routes import auth, datasets, jobs, system, users
from app.core.config import Settings, get_settings
from app.core.errors import QatuneError
from app.core.logging import setup_logging
from app.core.security import load_or_create_secret
from app.core.storage import Storage
from app.db.session import Database
from app.ml.environment import apply_torch_environment
from app.services.users import ensure_first_admin

if TYPE_CHECKING:
    from app.ml.query_service import QueryService

WEB_DIR = Path(__file__).parent / "web"


def device_report(settings: Settings) -> dict[str, Any]:
    """What training would use here and why; raises at start if QATUNE_DEVICE is absent."""
    from app.ml.device import probe_capabilities, select_device, select_precision
    from app.ml.device_benchmark import load_benchmark
    from app.ml.planner import memory_budget_gb

    caps = probe_capabilities()
    benchmark = load_benchmark(settings.data_dir)
    winner = benchmark.get("winner") if benchmark else None
    decision = select_device(caps, settings.device, winner)
    precision = select_precision(caps, decision.device)
    budget, budget_why = memory_budget_gb(decision.device, caps)
    return {
        "device": decision.device,
        "precision": precision.precision,
        "loss_scaling": precision.loss_scaling,
        "memory_budget_gb": round(budget, 2),
        "reasons": [*decision.reasons, precision.reason, f"memory budget: {budget_why}"],
        "requested": settings.device,
        "benchmark": benchmark,
        "capabilities": caps.as_dict(),
    }


def make_query_service(settings: Settings, report: dict[str, Any]) -> "QueryService":
    """Answers on the device and in the precision that training uses here."""
    from app.ml.query_service import QueryService

    return QueryService(
        device=report["device"],
        precision=report["precision"],
        model_cache_dir=Storage(settings.data_dir).models_dir,
        offline=settings.offline,
        cache_size=settings.query_cache_size,
    )


def build_context(settings: Settings) -> AppContext:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    secret = (
        settings.secret_key.get_secret_value()
        if settings.secret_key
        else load_or_create_secret(settings.data_dir / "secret_key")
    )
    database = Database.from_settings(settings)
    database.migrate()
    with database.session() as session:
        ensure_first_admin(session, settings)
    report = device_report(settings)
    return AppContext(
        settings=settings,
        database=database,
        storage=Storage(settings.data_dir),
        secret_key=secret,
        query_service=make_query_service(settings, report),
        device_report=report,
    )


def _error(status: int, detail: str, errors: list[dict[str, Any]] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail, "errors": errors or []}, status_code=status)


def _field(loc: tuple[Any, ...]) -> str:
    # Drop "body" and pydantic's union-branch tags so the field reads as the user wrote it.
    parts = [str(p) for p in loc if p != "body" and not str(p).startswith(("literal[", "list["))]
    parts = [p for p in parts if p not in ("int", "float", "constrained-int")]
    return ".".join(parts) or "body"


def install_error_handlers(app: FastAPI) -> None:
    from app.ml.models import ModelUnavailable
    from app.ml.query_service import AdapterInvalid

    @app.exception_handler(QatuneError)
    async def domain_error(_: Request, exc: QatuneError) -> JSONResponse:
        response = _error(exc.status_code, exc.message, exc.details)
        if exc.status_code == 401:
            response.headers["WWW-Authenticate"] = "Bearer"
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


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    # Before anything imports torch (the error handlers below import the query service).
    apply_torch_environment(
        mps_fallback=settings.mps_fallback,
        mps_high_watermark_ratio=settings.mps_high_watermark_ratio,
        mps_low_watermark_ratio=settings.mps_low_watermark_ratio,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        setup_logging(settings.log_dir)
        context = build_context(settings)
        app.state.context = context
        logger.info(
            "qatune ready: device {} ({}), database {}",
            context.device_report["device"],
            context.device_report["precision"],
            context.database.url.split("///")[-1],
        )
        if settings.embedded_worker:
            from app.worker.supervisor import Worker

            context.worker = Worker(
                context.database, settings, before_job=_free_query_models(context)
            )
            context.worker.start()
        try:
            yield
        finally:
            if context.worker:
                context.worker.stop()
            context.database.dispose()

    app = FastAPI(
        title="qatune",
        version="0.1.0",
        description="Fine-tune language models with LoRA on question-answer pairs.",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    protected = [Depends(get_current_user)]
    app.include_router(system.health_router)
    app.include_router(auth.router)
    app.include_router(users.router, dependencies=protected)
    app.include_router(datasets.router, dependencies=protected)
    app.include_router(jobs.router, dependencies=protected)
    app.include_router(system.router, dependencies=protected)
    if WEB_DIR.is_dir():
        app.mount("/ui", StaticFiles(directory=WEB_DIR, html=True), name="ui")

        @app.get("/", include_in_schema=False)
        def root() -> RedirectResponse:
            return RedirectResponse("/ui/")

    return app


def _free_query_models(context: AppContext) -> Any:
    """On a GPU the cached query models compete with training for memory: drop them first."""

    def before_job() -> None:
        if context.device_report["device"] != "cpu" and context.query_service.loaded:
            dropped = context.query_service.drop_cached()
            logger.info("Dropped {} cached query model(s) to free the device for training", dropped)

    return before_job


def app_factory() -> FastAPI:
    """For `uvicorn --factory app.main:app_factory`."""
    return create_app()


app = create_app()  # `uvicorn app.main:app`
