"""/docs (Swagger UI) and /redoc from assets in the package, not a CDN.

FastAPI's own pages load their JavaScript from jsDelivr, so on a machine without
internet they are blank. The assets come from the pinned `fastapi-offline` wheel, which
ships Swagger UI's and ReDoc's bundles (its app factory is not used, only its files).
"""

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = Path(fastapi_offline.__file__).parent / "static"
ASSETS_URL = "/docs-assets"
OAUTH2_REDIRECT = "/docs/oauth2-redirect"


def install_docs(app: FastAPI) -> None:
    """Call on an app made with docs_url=None and redoc_url=None."""
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title=f"{app.title} — API",
            oauth2_redirect_url=OAUTH2_REDIRECT,
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
        )

    @app.get(OAUTH2_REDIRECT, include_in_schema=False)
    def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url="/openapi.json",
            title=f"{app.title} — API",
            redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )
