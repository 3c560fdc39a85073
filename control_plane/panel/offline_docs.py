"""`/docs` with Swagger UI served from this process, so it works on a control plane that cannot
reach the internet (FastAPI's own page loads the script and the stylesheet from a CDN).

The files come from the `swagger-ui-bundle-v2` package (Swagger UI 5, which reads the OpenAPI 3.1
FastAPI writes); nothing is vendored into this repository.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

__all__ = ["ASSETS_PREFIX", "mount_offline_docs"]

ASSETS_PREFIX = "/docs-assets"


def mount_offline_docs(app: FastAPI) -> None:
    """Serve `/docs` from local assets; the app must be built with `docs_url=None`."""
    app.mount(ASSETS_PREFIX, StaticFiles(directory=Path(str(swagger_ui_path))), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} — API",
            swagger_js_url=f"{ASSETS_PREFIX}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_PREFIX}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_PREFIX}/favicon-32x32.png",
        )
