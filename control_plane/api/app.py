"""The FastAPI application: routers, the server-time stamp, and errors as `{"detail": …}`."""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from control_plane.api import admin, agent, forecast, metrics, notifications, panel, webhook
from control_plane.errors import RequestRefused
from control_plane.panel import mount_panel
from control_plane.panel.offline_docs import mount_offline_docs
from control_plane.services import Services
from ground.clock import Clock
from ground.contract import SERVER_TIME_HEADER, format_instant
from shared_planner.errors import describe_value

__all__ = ["create_app"]

logger = logging.getLogger(__name__)


class ServerTime:
    """Reads the clock once per request: handlers use `request.state.now`, and every response —
    304s and errors included — carries that instant, so agents learn the server's clock."""

    def __init__(self, app: ASGIApp, clock: Clock) -> None:
        self._app = app
        self._clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        now = self._clock.now()
        scope.setdefault("state", {})["now"] = now
        stamp = format_instant(now).encode("ascii")

        async def send_with_time(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((SERVER_TIME_HEADER.lower().encode("ascii"), stamp))
                message = {**message, "headers": headers}
            await send(message)

        await self._app(scope, receive, send_with_time)


def _field_path(location: tuple[Any, ...]) -> str:
    parts = [str(part) for part in location if part not in {"body", "query", "path", "header"}]
    path = ""
    for part in parts:
        path += f"[{part}]" if part.isdigit() else (f".{part}" if path else part)
    return path or "body"


async def _refused(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestRefused)
    return JSONResponse({"detail": exc.detail}, status_code=exc.status)


async def _invalid_request(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = []
    for error in exc.errors():
        field = _field_path(tuple(error.get("loc", ())))
        if error.get("type") == "missing":
            problems.append({"field": field, "message": f"{field}: is required"})
            continue
        value = describe_value(error.get("input"))
        reason = str(error.get("msg", "is not valid")).rstrip(".")
        message = f"{field}: {value} — {reason[:1].lower()}{reason[1:]}"
        problems.append({"field": field, "message": message})
    return JSONResponse(
        {
            "detail": {
                "code": "invalid_request",
                "message": "; ".join(problem["message"] for problem in problems),
                "errors": problems,
            }
        },
        status_code=422,
    )


async def _database_unavailable(_: Request, exc: Exception) -> JSONResponse:
    logger.error("database error: %s", exc)
    return JSONResponse(
        {"detail": {"code": "database_unavailable", "message": "the database is not reachable"}},
        status_code=503,
    )


def create_app(services: Services, clock: Clock) -> FastAPI:
    app = FastAPI(
        title="nachtwacht control plane",
        version="1",
        description=(
            "Scheduled, throttled, signed self-updates. Panel endpoints take a panel key "
            "(`nwp_…`), agent endpoints an agent key (`nwa_…`), admin endpoints an operator key "
            "(`nwo_…`), as `Authorization: Bearer …`."
        ),
        # /docs is served from local files (mount_offline_docs below); ReDoc would need a CDN.
        docs_url=None,
        redoc_url=None,
    )
    app.state.services = services
    app.add_exception_handler(RequestRefused, _refused)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    # Also psycopg_pool.PoolTimeout (every connection busy): agents retry later.
    app.add_exception_handler(psycopg.OperationalError, _database_unavailable)
    app.include_router(panel.router)
    app.include_router(agent.router)
    app.include_router(admin.router)
    app.include_router(notifications.router)
    app.include_router(webhook.router)
    app.include_router(forecast.router)
    app.include_router(metrics.router)

    # The panel (issue 15): server-rendered pages under /panel/ over the same services, and
    # /docs without a CDN.
    mount_panel(app)
    mount_offline_docs(app)

    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, str]:
        """Liveness, without the database: also the benchmark's bare baseline endpoint."""
        return {"status": "ok"}

    app.add_middleware(ServerTime, clock=clock)
    return app
