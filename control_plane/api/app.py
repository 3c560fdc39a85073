"""The FastAPI application: every domain's router, the stamps of every answer (the server's time,
the contract's version), and the mapping of domain errors to `{"detail": …}` answers with their
status."""

from __future__ import annotations

import logging
import math
from datetime import datetime
from typing import Any

import psycopg
from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from control_plane.answers_cache.hot_answers import HotAnswers
from control_plane.api.agent_contract import CONTRACT_STAMP, agent_refusal
from control_plane.api.answers import bounded_message, refusal_response
from control_plane.api.credential_first import credential_refusal
from control_plane.api.hot_calls import ServicesFromMemory
from control_plane.api.limits import RequestLimits, state_storable_text
from control_plane.api.routes import (
    accounts,
    agent_config,
    agents,
    brake,
    claims,
    enrollment,
    events,
    forecast,
    metrics,
    notifications,
    releases,
    runs,
    settings,
    trust_roots,
)
from control_plane.api.routes import agents_host as agent_host
from control_plane.api.routes import pins as pins_routes
from control_plane.api.routes import rollout as rollout_routes
from control_plane.errors import RequestRefused
from control_plane.panel import mount_panel
from control_plane.panel.form_refusal import form_refused, is_panel_path
from control_plane.panel.offline_docs import mount_offline_docs
from control_plane.registry import Services
from ground.clock import Clock
from ground.contract import API_VERSION, SERVER_TIME_HEADER, AnswerCode, format_instant
from shared_planner.errors import describe_value

__all__ = ["create_app"]

logger = logging.getLogger(__name__)

MAX_PROBLEMS_SHOWN = 10
_SERVER_TIME = SERVER_TIME_HEADER.lower().encode("ascii")


class ServerTime:
    """Reads the clock once per request: handlers use `request.state.now`, and every response —
    304s and errors included — carries that instant, so agents learn the server's clock, and the
    contract's version (`agent_contract`). An agent of a contract no longer served is refused
    here, before the limits and the routes read anything it sent. (One middleware for the
    stamps of every answer: each layer is paid by every request.)"""

    def __init__(self, app: ASGIApp, clock: Clock) -> None:
        self._app = app
        self._clock = clock
        # The header names whole seconds: formatted once per second, not once per request
        # (`strftime` was the largest cost this middleware added to a `/healthz`).
        self._stamp: tuple[int, bytes] = (-1, b"")

    def _stamp_of(self, now: datetime) -> bytes:
        second = math.floor(now.timestamp())
        cached_second, stamp = self._stamp
        if second != cached_second:
            stamp = format_instant(now).encode("ascii")
            self._stamp = (second, stamp)
        return stamp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        now = self._clock.now()
        scope.setdefault("state", {})["now"] = now
        stamp = self._stamp_of(now)

        async def send_with_time(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((_SERVER_TIME, stamp))
                headers.append(CONTRACT_STAMP)
                message = {**message, "headers": headers}
            await send(message)

        refusal = agent_refusal(scope)
        if refusal is not None:
            for message in refusal:
                await send_with_time(message)
            return
        await self._app(scope, receive, send_with_time)


def _field_path(location: tuple[Any, ...]) -> str:
    parts = [str(part) for part in location if part not in {"body", "query", "path", "header"}]
    path = ""
    for part in parts:
        path += f"[{part}]" if part.isdigit() else (f".{part}" if path else part)
    return path or "body"


async def _refused(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestRefused)
    return refusal_response(exc)


async def _credential_first(request: Request) -> Response | None:
    """The 401/403 (or the database's 503) that comes before a 422 (`credential_first`)."""
    try:
        refused = await credential_refusal(request)
    except psycopg.OperationalError as exc:
        return await _database_unavailable(request, exc)
    return None if refused is None else refusal_response(refused)


async def _invalid_request(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    if is_panel_path(request.url.path):
        # A person at a browser: a page in their language, not the API's JSON.
        return await run_in_threadpool(form_refused, request, exc.errors())
    refused = await _credential_first(request)
    if refused is not None:
        return refused
    problems = []
    # A body can break a rule in thousands of places; the first few name the problem.
    for error in exc.errors()[:MAX_PROBLEMS_SHOWN]:
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
                "code": AnswerCode.INVALID_REQUEST.value,
                "message": bounded_message("; ".join(problem["message"] for problem in problems)),
                "errors": problems,
            }
        },
        status_code=422,
    )


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _methods_of_path(request: Request) -> str:
    """Every method the request's path has, over all its routes: the router answers 405 from the
    first route whose path matched, which names that route's methods alone."""
    allowed = [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL
            for route in request.app.router.routes
        )
    ]
    return ", ".join(allowed)


async def _unreadable_body(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 405:
        allowed = StarletteHTTPException(405, headers={"Allow": _methods_of_path(request)})
        return await http_exception_handler(request, allowed)
    if exc.status_code != 400:
        return await http_exception_handler(request, exc)
    # FastAPI's 400 is a body it could not decode at all (not UTF-8, say); malformed JSON is
    # already a 422 `invalid_request`, and so is this — after the credential, as that one.
    refused = await _credential_first(request)
    if refused is not None:
        return refused
    return JSONResponse(
        {
            "detail": {
                "code": AnswerCode.INVALID_REQUEST.value,
                "message": f"body: cannot be read as JSON ({exc.detail})",
            }
        },
        status_code=422,
    )


# How much of the database's account of where a cancelled statement waited goes into its line.
MAX_CONTEXT_LOGGED = 300


def cancelled_statement_line(method: str, path: str, exc: Exception) -> str | None:
    """The one line logged for a request whose statement the database cancelled — by the request
    connections' `lock_timeout` or `statement_timeout` (`database.SessionBounds`) or by hand —
    naming the request, the bound and what it waited for; None for any other failure."""
    if not isinstance(exc, psycopg.errors.LockNotAvailable | psycopg.errors.QueryCanceled):
        return None
    said = exc.diag.message_primary or str(exc).strip().split("\n")[0]
    if "lock timeout" in said:
        bound = " (the request connections' lock_timeout, --request-lock-timeout-seconds)"
    elif "statement timeout" in said:
        bound = " (the request connections' statement_timeout, --request-statement-timeout-seconds)"
    else:
        bound = ""
    context = " ".join((exc.diag.context or "").split())
    if len(context) > MAX_CONTEXT_LOGGED:
        context = context[: MAX_CONTEXT_LOGGED - 1] + "…"
    where = f"; {context}" if context else ""
    return (
        f"{method} {path} answered 503 database_unavailable: {said}{bound}{where}"
        " (pg_blocking_pids() of the sessions waiting for a lock names who holds it)"
    )


async def _database_unavailable(request: Request, exc: Exception) -> JSONResponse:
    cancelled = cancelled_statement_line(request.method, request.url.path, exc)
    if cancelled is not None:
        logger.error("%s", cancelled)
    else:
        logger.error("database error: %s", exc)
    return JSONResponse(
        {
            "detail": {
                "code": AnswerCode.DATABASE_UNAVAILABLE.value,
                "message": "the database is not reachable",
            }
        },
        status_code=503,
    )


class Health(BaseModel):
    status: str


def create_app(services: Services, clock: Clock, *, database_threads: int = 10) -> FastAPI:
    """The API over `services`; `database_threads` bounds the hot routes' worker threads (give
    the pool's size)."""
    app = FastAPI(
        title="nachtwacht control plane",
        version=API_VERSION,
        description=(
            "Scheduled, throttled, signed self-updates. Panel endpoints take a panel key "
            "(`nwp_…`), agent endpoints an agent key (`nwa_…`), admin endpoints an operator key "
            "(`nwo_…`), as `Authorization: Bearer …`; a host enrolls with an enrollment token "
            "(`nwe_…`)."
        ),
        # /docs is served from local files (mount_offline_docs below); ReDoc would need a CDN.
        docs_url=None,
        redoc_url=None,
    )
    app.state.services = services
    app.state.database_threads = database_threads
    app.add_exception_handler(RequestRefused, _refused)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(StarletteHTTPException, _unreadable_body)
    # Also psycopg_pool.PoolTimeout (every connection busy): agents retry later.
    app.add_exception_handler(psycopg.OperationalError, _database_unavailable)

    # Routes are matched in order: the liveness probe first, ahead of every domain's routes.
    @app.get("/healthz", tags=["health"], response_model=Health)
    async def healthz() -> Health:
        """Liveness, without the database. `async`: a `def` route costs a worker-thread hop."""
        return Health(status="ok")

    # The agents' two calls of every minute next, then the rest.
    for module in (
        agent_config,
        claims,
        agent_host,
        agents,
        runs,
        events,
        settings,
        brake,
        releases,
        trust_roots,
        rollout_routes,
        pins_routes,
        notifications,
        forecast,
        metrics,
        accounts,
        enrollment,
    ):
        app.include_router(module.router)

    # The panel: server-rendered pages under /panel/ over the same services, and
    # /docs without a CDN.
    mount_panel(app)
    mount_offline_docs(app)

    describe = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            state_storable_text(describe())
        return app.openapi_schema or describe()

    app.openapi = openapi  # type: ignore[method-assign]

    # Innermost of the three: the limits and the server time hold for answers from memory too.
    app.add_middleware(HotAnswers, answers=ServicesFromMemory(services))
    app.add_middleware(RequestLimits)
    app.add_middleware(ServerTime, clock=clock)
    return app
