"""create_app(): the HTTP application. Run it with `uvicorn --factory app.main:create_app`
(or `qatune serve`); nothing is built at import time."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import Depends, FastAPI
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles
from loguru import logger

from app.api import openai as openai_api
from app.api.deps import get_current_user, json_text_is_unicode
from app.api.docs import install_docs
from app.api.errors import install_error_handlers
from app.api.guard import RequestGuard
from app.api.language import RequestLanguage
from app.api.openapi import install_openapi
from app.api.request_timer import RequestTimer
from app.api.routes import api_keys, auth, datasets, job_models, jobs, system, users
from app.core.config import Settings, get_settings
from app.core.logging import setup_logging
from app.runtime import Runtime
from app.services.accounts.users import ensure_first_admin

WEB_DIR = Path(__file__).parent / "web"


def create_app(settings: Settings | None = None, *, runtime: Runtime | None = None) -> FastAPI:
    """The app for `settings` (default: the environment's), on `runtime` if one is given."""
    settings = settings or get_settings()
    runtime = runtime or Runtime(settings)  # sets torch's environment before it is imported

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        setup_logging(settings.log_dir)
        with runtime.database.session() as session:
            ensure_first_admin(session, settings)
        runtime.secret_key  # noqa: B018  (made at first start, not at the first sign-in)
        plan = runtime.device_plan
        await run_in_threadpool(runtime.warm_up)
        logger.info(
            "qatune ready: device {} ({}), database {}",
            plan.device,
            plan.precision,
            runtime.database.url.split("///")[-1],
        )
        if settings.embedded_worker:
            runtime.start_worker()
        await run_in_threadpool(runtime.eval_runner.recover)
        try:
            yield
        finally:
            await runtime.eval_runner.close()
            runtime.close()

    app = FastAPI(
        title="qatune",
        version="0.1.0",
        description="Fine-tune language models with LoRA on question-answer pairs.",
        lifespan=lifespan,
        docs_url=None,  # served by install_docs from the package: no CDN
        redoc_url=None,
        dependencies=[Depends(json_text_is_unicode)],
    )
    app.state.runtime = runtime
    install_error_handlers(app)
    install_openapi(app)
    install_docs(app)
    app.add_middleware(
        RequestGuard,
        max_upload_bytes=lambda: runtime.settings.max_upload_bytes,
        authenticate=runtime.user_id_for_token,
    )
    # Around the guard: its refusals are in the request's language too.
    app.add_middleware(RequestLanguage)
    # Outermost: a request the guard refuses is timed too.
    app.add_middleware(RequestTimer, observe=lambda *labels: runtime.metrics.observe(*labels))
    protected = [Depends(get_current_user)]
    app.include_router(system.health_router)
    app.include_router(auth.router)
    app.include_router(users.router, dependencies=protected)
    app.include_router(api_keys.router, dependencies=protected)
    app.include_router(datasets.router, dependencies=protected)
    app.include_router(jobs.router, dependencies=protected)
    app.include_router(job_models.router, dependencies=protected)
    app.include_router(system.router, dependencies=protected)
    app.include_router(openai_api.router, dependencies=protected)
    if WEB_DIR.is_dir():
        app.mount("/ui", StaticFiles(directory=WEB_DIR, html=True), name="ui")

        @app.get("/", include_in_schema=False)
        def root() -> RedirectResponse:
            return RedirectResponse("/ui/")

    return app
