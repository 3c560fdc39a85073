"""The FastAPI application: every domain's router, the stamps of every answer (the server's time,
the contract's version), and the mapping of domain errors to `{"detail": …}` answers with their
status.

A request whose statement the database cancelled (a lock held by hand, a runaway statement: the
request connections' bounds, `database.SessionBounds`) is answered 503 and said in the log as a
lasting condition (`CancelledRequests`): behind one lock every poll of an organisation's agents
meets it, forty a minute for forty agents, so the first of each route and bound is said at once
naming what it waited for, the rest are counted and said at most once a minute, and one line says
when none has been met for a minute.
"""

from __future__ import annotations

import logging
import math
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import PlainTextResponse, Response
from psycopg_pool import PoolTimeout
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from control_plane.answers_cache.hot_answers import HotAnswers
from control_plane.api.agent_contract import CONTRACT_STAMP, agent_refusal
from control_plane.api.answers import InertJSON, bounded_message, refusal_response
from control_plane.api.credential_first import credential_refusal
from control_plane.api.deps import services_of
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
from control_plane.panel.form_refusal import (
    address_refused,
    address_unserved,
    failure_page,
    form_refused,
    form_too_large,
    is_panel_path,
    service_refused,
)
from control_plane.panel.offline_docs import mount_offline_docs
from control_plane.registry import Services
from control_plane.repeated_warning import RepeatedWarning
from ground.clock import Clock
from ground.contract import API_VERSION, SERVER_TIME_HEADER, AnswerCode, format_instant
from ground.contract.plain_text import clipped
from shared_planner.errors import describe_value

__all__ = ["CancelledRequests", "create_app"]

logger = logging.getLogger(__name__)

MAX_PROBLEMS_SHOWN = 10
_SERVER_TIME = SERVER_TIME_HEADER.lower().encode("ascii")


class ServerTime:
    """Reads the clock once per request: handlers use `request.state.now`, and every response —
    304s and errors included — carries that instant, so agents learn the server's clock, and the
    contract's version (`agent_contract`). An agent of a contract no longer served is refused
    here, before the limits and the routes read anything it sent. (One middleware for the
    stamps of every answer: each layer is paid by every request.)"""

    def __init__(
        self, app: ASGIApp, clock: Clock, cancelled: CancelledRequests | None = None
    ) -> None:
        self._app = app
        self._clock = clock
        self._cancelled = cancelled
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
                cancelled = self._cancelled
                if cancelled is not None and cancelled.holding:
                    cancelled.quiet()
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


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestRefused)
    if is_panel_path(request.url.path):
        # A person at a browser: a page in their language, not the API's JSON.
        page = await run_in_threadpool(service_refused, request, exc)
        if page is not None:
            return page
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
    return InertJSON(
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
    if is_panel_path(request.url.path) and exc.status_code in {404, 405}:
        # A person at a browser: the panel's page (or the form's page), not the API's JSON.
        allow = _methods_of_path(request) if exc.status_code == 405 else ""
        page = await run_in_threadpool(address_unserved, request, exc.status_code, allow)
        if page is not None:
            return page
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
    return InertJSON(
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
# How often requests of one route cancelled by one bound are said again while it lasts.
CANCELLED_LOG_EVERY_SECONDS = 60.0
_BLOCKING_HINT = " (pg_blocking_pids() of the sessions waiting for a lock names who holds it)"


def is_cancelled_statement(exc: BaseException) -> bool:
    """Whether the database cancelled the statement: by a bound (`lock_timeout`,
    `statement_timeout`) or by hand (`pg_cancel_backend`)."""
    return isinstance(exc, psycopg.errors.LockNotAvailable | psycopg.errors.QueryCanceled)


def _cancel_words(exc: psycopg.Error) -> tuple[str, str, str]:
    """What the database said, the bound that cancelled it (in words, empty when none of the
    requests' bounds), and where the statement waited (empty when it did not say)."""
    said = exc.diag.message_primary or str(exc).strip().split("\n")[0]
    if "lock timeout" in said:
        bound = "the request connections' lock_timeout, --request-lock-timeout-seconds"
    elif "statement timeout" in said:
        bound = "the request connections' statement_timeout, --request-statement-timeout-seconds"
    else:
        bound = ""
    context = " ".join((exc.diag.context or "").split())
    return said, bound, clipped(context, MAX_CONTEXT_LOGGED)


def cancelled_statement_line(method: str, path: str, exc: Exception) -> str | None:
    """The line logged for a request whose statement the database cancelled — by the request
    connections' `lock_timeout` or `statement_timeout` (`database.SessionBounds`) or by hand —
    naming the request, the bound and what it waited for; None for any other failure."""
    if not isinstance(exc, psycopg.Error) or not is_cancelled_statement(exc):
        return None
    said, bound, context = _cancel_words(exc)
    shown_bound = f" ({bound})" if bound else ""
    where = f"; {context}" if context else ""
    return (
        f"{method} {path} answered 503 database_unavailable: {said}{shown_bound}{where}"
        f"{_BLOCKING_HINT}"
    )


def _route_of(scope: Scope) -> str | None:
    """The pattern of the route that served the request (`/v1/agents/{agent_id}`): every agent's
    request of one kind is one route. None when no route served it (an answer from memory)."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else None


@dataclass(kw_only=True)
class _Cancelling:
    """One route's requests cancelled by one bound: said by `warning`; `last_at` the latest
    (monotonic seconds)."""

    warning: RepeatedWarning
    last_at: float


class CancelledRequests:
    """The log lines of requests whose statement the database cancelled, per route (its pattern:
    every agent's poll is one) and bound: the first at once (`cancelled_statement_line`: the
    request, the bound, what it waited for), then at most every `every_seconds` how many more
    were met and for how long, naming the latest and where it waited; and once none was met for
    `every_seconds`, that it is over (`quiet`, at the next answer of any request). Over by silence,
    not by a request of the route answered: behind a lock on one organisation's rows the others'
    requests of the same route are served all along."""

    def __init__(
        self,
        every_seconds: float | None = None,
        *,
        monotonic: Callable[[], float] | None = None,
    ) -> None:
        self._every = CANCELLED_LOG_EVERY_SECONDS if every_seconds is None else every_seconds
        self._monotonic = monotonic
        self._lock = threading.Lock()
        # Per (method, route, what cancelled it).
        self._held: dict[tuple[str, str, str], _Cancelling] = {}

    @property
    def holding(self) -> bool:
        """Whether requests were cancelled and that is not yet said to be over."""
        return bool(self._held)

    def cancelled(self, method: str, scope: Scope, path: str, exc: psycopg.Error) -> str | None:
        """The line to say for this cancelled request now, or None to stay quiet."""
        route = _route_of(scope) or path
        said, bound, context = _cancel_words(exc)
        key = (method, route, bound or said)
        now = self._now()
        with self._lock:
            held = self._held.get(key)
            if held is None:
                warning = RepeatedWarning(self._every, monotonic=self._now)
                held = _Cancelling(warning=warning, last_at=now)
                self._held[key] = held
            held.last_at = now
            repeat = held.warning.holds()
            if repeat is None:
                return None
        if repeat.first:
            line = cancelled_statement_line(method, path, exc)
            return (
                f"{line}; more of {method} {route} cancelled so are counted and said at most"
                f" every {self._every:.0f} s"
            )
        where = f"; the latest, {path}, waited: {context}" if context else f"; the latest, {path}"
        return (
            f"{method} {route}: {repeat.unsaid + 1} more requests answered 503"
            f" database_unavailable ({bound or said}) since the last line, for"
            f" {repeat.held_seconds:.0f} s now{where}{_BLOCKING_HINT}"
        )

    def quiet(self) -> None:
        """Say, of each route whose requests have not been cancelled for `every_seconds`, that
        it is over: how long it lasted and how many were met since the last line."""
        now = self._now()
        with self._lock:
            over = [key for key, held in self._held.items() if now - held.last_at >= self._every]
            ended = [(key, self._held.pop(key)) for key in over]
        for (method, route, bound), held in ended:
            since_first = held.warning.ended() or 0.0
            logger.warning(
                "%s %s: no request cancelled (%s) for %.0f s; it lasted %.0f s, %d more since"
                " the last line",
                method,
                route,
                bound,
                now - held.last_at,
                since_first - (now - held.last_at),
                held.warning.unsaid,
            )

    def _now(self) -> float:
        return self._monotonic() if self._monotonic is not None else time.monotonic()


def _say_unavailable(request: Request, cause: str, exc: Exception) -> None:
    """A request turned away for want of the database, in the log: the first of a cause at once,
    then how many more at most every `CANCELLED_LOG_EVERY_SECONDS` (a pool too small for the
    night is met by every agent's request: a line each would bury the one that says why)."""
    warning: RepeatedWarning = request.app.state.unavailable_lines
    repeat = warning.holds(cause)
    if repeat is None:
        return
    said = " ".join(str(exc).split()) or type(exc).__name__
    if repeat.first:
        logger.error(
            "%s %s answered 503 database_unavailable (%s): %s; more are counted"
            " (nachtwacht_requests_database_unavailable_total) and said at most every %.0f s",
            request.method,
            request.url.path,
            cause,
            said,
            CANCELLED_LOG_EVERY_SECONDS,
        )
    else:
        logger.error(
            "%d more requests answered 503 database_unavailable (%s) in %.0f s; the latest,"
            " %s %s: %s",
            repeat.unsaid + 1,
            cause,
            repeat.held_seconds,
            request.method,
            request.url.path,
            said,
        )


async def _database_unavailable(request: Request, exc: Exception) -> InertJSON:
    unavailable = services_of(request).metrics.unavailable
    if isinstance(exc, psycopg.Error) and is_cancelled_statement(exc):
        unavailable.count("cancelled")
        cancelled: CancelledRequests = request.app.state.cancelled
        line = cancelled.cancelled(request.method, request.scope, request.url.path, exc)
        if line is not None:
            logger.error("%s", line)
    else:
        cause = "pool_wait" if isinstance(exc, PoolTimeout) else "connection"
        unavailable.count(cause)
        _say_unavailable(request, cause, exc)
    return InertJSON(
        {
            "detail": {
                "code": AnswerCode.DATABASE_UNAVAILABLE.value,
                "message": "the database is not reachable",
            }
        },
        status_code=503,
    )


async def _unexpected(request: Request, exc: Exception) -> Response:
    """An exception nothing else handles (a defect): logged with a short reference, which the
    panel's page shows the reader (nothing of the exception itself); the API keeps Starlette's
    plain 500. Starlette raises the exception again after the answer, for the server's log."""
    reference = secrets.token_hex(6)
    logger.error(
        "unexpected exception, reference %s: %s %s",
        reference,
        request.method,
        request.url.path,
        exc_info=exc,
    )
    page = failure_page(request.scope, reference)
    if page is not None:
        return page
    return PlainTextResponse("Internal Server Error", status_code=500)


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
        # Each text of every JSON answer inert, whatever the row it came from holds.
        default_response_class=InertJSON,
    )
    app.state.services = services
    app.state.database_threads = database_threads
    app.state.cancelled = CancelledRequests()
    app.state.unavailable_lines = RepeatedWarning(CANCELLED_LOG_EVERY_SECONDS)
    app.add_exception_handler(RequestRefused, _refused)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(StarletteHTTPException, _unreadable_body)
    # Also psycopg_pool.PoolTimeout (every connection busy): agents retry later.
    app.add_exception_handler(psycopg.OperationalError, _database_unavailable)
    app.add_exception_handler(Exception, _unexpected)

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
    app.add_middleware(
        RequestLimits, too_large_page=form_too_large, bad_address_page=address_refused
    )
    app.add_middleware(ServerTime, clock=clock, cancelled=app.state.cancelled)
    return app
