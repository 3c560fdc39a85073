"""What every panel page shares: the reader's language, the session, CSRF, and rendering.

Each page is rendered by the Jinja2 environment of the reader's language (one per language, each
with its catalog installed), so a template's `_()` always speaks the right language.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from functools import partial
from pathlib import Path
from typing import Annotated, Any, cast
from urllib.parse import quote, unquote, urlsplit

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError
from starlette.routing import Match, Route

from control_plane.accounts.credentials import Audience
from control_plane.accounts.sessions import PanelSession
from control_plane.panel import backend, event_wording, rollout_backend, rollout_wording, wording
from control_plane.panel.charts import Bar, bar_chart
from control_plane.panel.csrf import (
    csrf_token_for,
    new_once_token,
    new_signin_token,
    tokens_match,
)
from control_plane.panel.i18n import LANGUAGES, Language, choose_language, language_names
from control_plane.registry import Services
from ground.clock import Clock
from ground.whole_numbers import whole_number as ground_whole_number

__all__ = [
    "LANGUAGE_COOKIE",
    "ROUTES_STATE",
    "SESSION_CLOCK_STATE",
    "SESSION_COOKIE",
    "SIGNIN_COOKIE",
    "PanelContext",
    "WholeNumber",
    "csrf_ok",
    "forecast_chart",
    "form_page",
    "here",
    "not_found",
    "page",
    "public_form_page",
    "redirect",
    "refused",
    "safe_next",
    "unsigned_context",
    "whole_number",
    "with_headers",
]

TEMPLATES = Path(__file__).resolve().parent / "templates"
SESSION_COOKIE = "nw_panel_session"
SIGNIN_COOKIE = "nw_panel_signin"
LANGUAGE_COOKIE = "nw_panel_language"
PREFIX = "/panel"
# Where `mount_panel` keeps the clock the sign-in sessions run on (real time; see there).
SESSION_CLOCK_STATE = "panel_session_clock"
# Where `mount_panel` keeps the panel's routes, in the order they are matched (`form_page`).
ROUTES_STATE = "panel_routes"

# The panel loads nothing from elsewhere and runs no inline script: a page that is injected into
# still cannot call out, and no other site may frame it.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}

_environments: dict[str, Environment] = {}


def environment(code: str) -> Environment:
    env = _environments.get(code)
    if env is None:
        env = Environment(
            loader=FileSystemLoader(TEMPLATES),
            autoescape=select_autoescape(["html", "svg"]),
            extensions=["jinja2.ext.i18n"],
            trim_blocks=True,
            lstrip_blocks=True,
        )
        lang = Language(code)
        env.install_gettext_translations(lang.translations, newstyle=True)  # type: ignore[attr-defined]
        env.filters["key_name"] = partial(wording.key_name, lang)
        # The modules that word the core's facts, for every page that says them.
        env.globals.update(
            wording=wording, event_wording=event_wording, rollout_wording=rollout_wording
        )
        _environments[code] = env
    return env


def services_of(request: Request) -> Services:
    return cast(Services, request.app.state.services)


def request_now(request: Request) -> datetime:
    """The request's instant, read once by the app's clock middleware (`ServerTime`): every
    service call of one page sees the same moment."""
    return cast(datetime, request.state.now)


def session_now(request: Request) -> datetime:
    """The instant a session's idle and absolute limits are measured at: real time, whatever
    speed the product's clock runs at (an app without the panel's clock falls back to it)."""
    clock = getattr(request.app.state, SESSION_CLOCK_STATE, None)
    return request_now(request) if clock is None else cast(Clock, clock).now()


def safe_next(target: str | None) -> str:
    """Only a path inside the panel: a link may not send a reader to another site, nor out of
    the panel. Anything a browser reads otherwise than it is written (a backslash as a slash,
    spaces and control characters left out, `..` and `%2e%2e` as a step up) leads to the start."""
    if not target or any(char <= " " or char == "\x7f" for char in target):
        return PREFIX + "/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith(PREFIX + "/"):
        return PREFIX + "/"
    if "\\" in target or target.startswith("//"):
        return PREFIX + "/"
    if any(unquote(step) in {".", ".."} for step in parts.path.split("/")):
        return PREFIX + "/"
    return target


_PATH_PARAMETER = re.compile(r"\{([^}:]+)(?::[^}]*)?\}")


def _routes(request: Request) -> tuple[Route, ...]:
    return cast(tuple[Route, ...], getattr(request.app.state, ROUTES_STATE, ()))


def _route_of(request: Request) -> tuple[Route, dict[str, Any]] | None:
    """The panel route the request's address and method lead to, else the first its address
    does (as the router picks them), with the address's path parameters."""
    partial: tuple[Route, dict[str, Any]] | None = None
    for route in _routes(request):
        match, child = route.matches(request.scope)
        if match is Match.FULL:
            return route, child.get("path_params", {})
        if match is Match.PARTIAL and partial is None:
            partial = route, child.get("path_params", {})
    return partial


def form_page(request: Request) -> str:
    """The page of the form a request was sent from: the nearest route at or above the request's
    own, by its path pattern, that a GET serves (`…/agents/{id}/hold/end` → `…/agents/{id}`,
    `…/agents/bulk` → `…/agents`, `…/sign-in/person` → `…/sign-in`), with the request's ids
    put in; else the panel's start."""
    found = _route_of(request)
    if found is None:
        return PREFIX + "/"
    route, params = found
    pages = {other.path for other in _routes(request) if "GET" in (other.methods or ())}
    pattern = route.path
    while pattern.startswith(PREFIX + "/") and pattern not in pages:
        pattern = pattern.rsplit("/", 1)[0]
    if pattern not in pages:
        return PREFIX + "/"
    return _PATH_PARAMETER.sub(lambda name: quote(str(params.get(name[1], "")), safe=""), pattern)


def here(request: Request) -> str:
    """Where the page answering `request` can be opened again (the language links come back
    here): its own address for a GET; for a form's post, the form's page, never the address
    that only takes the post."""
    if request.method in {"GET", "HEAD"}:
        query = request.url.query
        return request.url.path + (f"?{query}" if query else "")
    return form_page(request)


@dataclass(frozen=True, kw_only=True)
class PanelContext:
    """One request as the panel sees it."""

    request: Request
    lang: Language
    now: datetime
    session_now: datetime  # the sessions' own instant (real time): see `session_now`
    session: PanelSession | None
    session_secret: str | None

    @property
    def csrf_token(self) -> str:
        """The token this session's forms carry; empty when nobody is signed in."""
        return csrf_token_for(self.session_secret) if self.session_secret else ""

    @property
    def services(self) -> Services:
        return services_of(self.request)

    @property
    def secure(self) -> bool:
        return self.request.url.scheme == "https"

    def set_session_cookie(self, response: Response, secret: str) -> None:
        """The signed-in reader's session cookie on `response`. It lives as long as the browser
        runs; the server decides when the session ends."""
        response.set_cookie(
            SESSION_COOKIE,
            secret,
            path=PREFIX,
            httponly=True,
            secure=self.secure,
            samesite="strict",
        )


def context_of(request: Request) -> PanelContext:
    now = request_now(request)
    at = session_now(request)
    secret = request.cookies.get(SESSION_COOKIE)
    session = backend.find_session(services_of(request), secret, now=at) if secret else None
    code = choose_language(
        request.cookies.get(LANGUAGE_COOKIE), request.headers.get("accept-language")
    )
    ctx = PanelContext(
        request=request,
        lang=Language(code),
        now=now,
        session_now=at,
        session=session,
        session_secret=secret if session else None,
    )
    request.state.panel_context = ctx
    return ctx


def unsigned_context(request: Request) -> PanelContext:
    """The request as the panel sees it without asking who sent it: the reader's language, no
    session (nothing is read from the database). For an answer given before any route runs."""
    now = request_now(request)
    code = choose_language(
        request.cookies.get(LANGUAGE_COOKIE), request.headers.get("accept-language")
    )
    return PanelContext(
        request=request,
        lang=Language(code),
        now=now,
        session_now=now,
        session=None,
        session_secret=None,
    )


def latest_context(request: Request) -> PanelContext:
    """The context the request's route read last (its reader, language and session as the route
    saw them), else a new one: for an answer chosen outside the route."""
    known = getattr(request.state, "panel_context", None)
    return known if isinstance(known, PanelContext) else context_of(request)


def whole_number(text: str) -> int | None:
    """`text` read as a whole number the way the panel's fields and addresses write one: ASCII
    digits only (the product's rule, `ground.whole_numbers`), nine at most (more is past any
    bound here)."""
    return ground_whole_number(text, max_digits=9)


def _digits_only(value: object) -> object:
    """A value `WholeNumber` takes: text of ASCII digits (pydantic's own reading of an `int`
    also takes a sign, spaces, `_` and `1.0`)."""
    if isinstance(value, str) and whole_number(value) is None:
        raise PydanticCustomError("whole_number", "expected a whole number in ASCII digits")
    return value


# A number a route reads from its address or its form (`?saved=1`, a row's remove button):
# ASCII digits only, as `whole_number` reads them; anything else is refused as a value the
# panel never sends (`form_refusal.form_refused`).
WholeNumber = Annotated[int, BeforeValidator(_digits_only)]


def csrf_ok(ctx: PanelContext, presented: str | None) -> bool:
    return ctx.session is not None and tokens_match(ctx.csrf_token, presented)


def with_headers(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response


def page(
    ctx: PanelContext,
    template: str,
    status_code: int = 200,
    *,
    back_here: str | None = None,
    **values: Any,
) -> HTMLResponse:
    """`template` rendered for the reader; `back_here`: where its language links lead, when not
    `here(request)`."""
    env = environment(ctx.lang.code)
    # The operators' navigation counts their unread notices (halts) on every page.
    unread = (
        rollout_backend.unread_notices(ctx.services)
        if ctx.session is not None and ctx.session.audience is Audience.OPERATOR
        else 0
    )
    html = env.get_template(template).render(
        unread_notices=unread,
        lang=ctx.lang,
        languages=language_names(),
        language_codes=LANGUAGES,
        session=ctx.session,
        csrf_token=ctx.csrf_token,
        once=new_once_token(),
        current_path=back_here or here(ctx.request),
        prefix=PREFIX,
        **values,
    )
    response = HTMLResponse(html, status_code=status_code)
    response.headers["Content-Language"] = ctx.lang.code
    return cast(HTMLResponse, with_headers(response))


def public_form_page(
    ctx: PanelContext, template: str, status_code: int = 200, **values: Any
) -> Response:
    """A form shown before any session (signing in, an invitation): it carries a fresh
    double-submit token, in the page and in `SIGNIN_COOKIE`."""
    token = new_signin_token()
    response = page(ctx, template, status_code=status_code, signin_token=token, **values)
    response.set_cookie(
        SIGNIN_COOKIE,
        token,
        max_age=3600,
        path=PREFIX,
        httponly=True,
        secure=ctx.secure,
        samesite="strict",
    )
    return response


def not_found(ctx: PanelContext) -> HTMLResponse:
    """The answer for an object this reader may not see: a malformed id, another organisation's
    object and one that is gone all look the same, so nobody learns what exists elsewhere."""
    return page(ctx, "not_found.html", status_code=404)


def refused(ctx: PanelContext) -> HTMLResponse:
    """The answer for a form post whose CSRF token is wrong or missing: nothing was changed."""
    return page(ctx, "refused.html", status_code=403)


def redirect(target: str) -> Response:
    # 303: after a form's POST the browser follows with a GET, so a reload does not post again.
    return with_headers(RedirectResponse(target, status_code=303))


def forecast_chart(ctx: PanelContext, night: date, bars: list[Bar]) -> Markup:
    """A night's demand per slot against what the limits allow, worded in the reader's language:
    the customer's forecast and the operator's nights are the same picture."""
    return bar_chart(
        bars,
        title=ctx.lang.gettext("Agents per slot on %(day)s", day=ctx.lang.day(night)),
        total_legend=ctx.lang.gettext("agents scheduled"),
        part_legend=ctx.lang.gettext("can update in the window"),
        limit_legend=ctx.lang.gettext("what the limits allow"),
        empty_text=ctx.lang.gettext("No agents are scheduled that night."),
        number=lambda n: ctx.lang.number(n),
    )
