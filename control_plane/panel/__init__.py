"""The panel: the customer's and the operator's screens, server-rendered, in nine languages.

    backend.py          the door into the control plane's services (only it and the three
                        below call them): the panel's errors, the sign-in sessions (the accounts
                        domain's `SessionService`), the platform's settings
    customer_backend.py   agents, schedules, manual runs, notifications, the webhook,
                          enrollment tokens
    operator_backend.py   the forecast and nights, the fleet and its trust root, releases,
                          credentials, the brake
    rollout_backend.py    stages, halts, a release's brake, notices, canaries, pins, holds
    csrf.py             the forms' CSRF tokens (derived from the session's secret), one-use tokens
    i18n.py             the nine languages: catalogs compiled at start, choice, CLDR formatting
    wording.py          the core's facts (problems, DST kinds, run states, reasons) said per
                        language;  event_wording.py  the trail's events, the notifications, a
                        webhook test;  rollout_wording.py  stages, halts, pins, holds, notices
    progress.py         a manual update's steps, from the click to the outcome
    schedule_editor.py  the editor's rows, the problem next to its row, the preview of the nights
    fleet_list.py       the agent list's view in the URL (search, state, order, page) checked
                        field by field, its page, and the bulk forms (one schedule, a hold,
                        its end, an update now) for many agents
    charts.py           SVG pictures drawn on the server
    web.py              shared by every page: context, rendering, security headers
    readers.py          who reads a page (customer with its organisation, operator) and the checks
                        every form post makes first: ids in the path, then the CSRF token; a
                        reader who may not go on is turned away (`TurnedAway`, answered here)
    form_refusal.py     the page for a form whose field breaks its route's bound (too long, not a
                        value the form sends, a field or parameter given twice with two
                        values, checked before every route): the field, the value and the
                        bound, in words; a form too large; an address with a NUL; a path
                        nothing serves or a method it does not take; an unexpected exception
                        (500, a reference)
    flash.py            a bulk form's result carried over its redirect (POST/redirect/GET)
    once.py             a form that shows a secret once makes one, however often it is sent
    people_backend.py   named people (`accounts.people`): invitations, roles, new links and
                        resets, removals, signing in as oneself
    people_routes.py    people invited by an editor (the link shown once), their role, a new
                        invitation or reset link, removal (operators' too); the provider's form
                        (saved, removed); the invitation's password form, the two steps of a
                        person's sign-in (password, TOTP)
    oidc_routes.py      the sign-in through an organisation's own OpenID Connect provider
                        (`accounts.oidc`: code flow, PKCE, the ID token)
    signin_routes.py    sign in/out, the language menu;  customer_routes.py, operator_routes.py
    progress_routes.py  a manual update's progress page and its JSON (polled by static/progress.js)
    release_routes.py, credential_routes.py    the operators' releases (stages, halts, the brake
                        of one release) and credentials
    rollout_routes.py   the operators' notices, organisations (their pin), one agent (canary, pin,
                        forced update);  hold_routes.py  a customer's hold of one agent;
                        bulk_routes.py  the list's hold, end of hold and update now for many;
                        default_schedule_routes.py  the schedule new agents take;
                        enrollment_routes.py  a customer's enrollment tokens (made, shown
                        once with the host's install line, listed, revoked)
    fleet.py            the fleet by version (agents per version per pair) as a picture
    history.py          the history pages' view in the URL (runs or events, agent, days, position),
                        the CSV export's lines (formulas defused), the versions per night as a
                        picture;  history_routes.py  its pages and downloads
    templates/ static/ locales/    Jinja2 pages, CSS and the one small script, the .po catalogs

`mount_panel(app)` adds the routes under /panel/ and the static files; docs/panel.md tells more.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import Depends, FastAPI, Request
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from starlette.routing import Route

from control_plane.panel import (
    backend,
    bulk_routes,
    credential_routes,
    customer_routes,
    default_schedule_routes,
    enrollment_routes,
    history_routes,
    hold_routes,
    oidc_routes,
    operator_routes,
    people_routes,
    progress_routes,
    release_routes,
    rollout_routes,
    signin_routes,
)
from control_plane.panel.form_refusal import one_value_per_field
from control_plane.panel.readers import TurnedAway
from control_plane.panel.web import ROUTES_STATE, SESSION_CLOCK_STATE, latest_context, not_found
from ground.clock import SystemClock

__all__ = ["STATIC_DIR", "mount_panel"]

STATIC_DIR = Path(__file__).resolve().parent / "static"


async def _turned_away(_: Request, exc: Exception) -> Response:
    """The page (or redirect) a reader check chose for a reader who may not go on."""
    assert isinstance(exc, TurnedAway)
    return exc.answer


def _missing(request: Request, _: Exception) -> Response:
    """An object a page's backend call found missing for this reader: the "not found" page, as
    for a malformed id, so nobody learns what exists elsewhere. A plain `def`: rendering a page
    reads the database, which must not block the event loop."""
    return not_found(latest_context(request))


# In the order their routes are matched.
ROUTERS = (
    signin_routes.router,
    people_routes.router,
    oidc_routes.router,
    customer_routes.router,
    history_routes.router,
    progress_routes.router,
    operator_routes.router,
    release_routes.router,
    rollout_routes.router,
    hold_routes.router,
    bulk_routes.router,
    default_schedule_routes.router,
    enrollment_routes.router,
    credential_routes.router,
)


def mount_panel(app: FastAPI) -> None:
    # Sessions measure a person's attention, which runs on real time: on the demo's fast clock
    # (60x) thirty idle product minutes would pass in thirty seconds, so `demo --keep` would sign
    # its reader out while they read. Only the sessions read this clock; every page still shows
    # and acts at the product's instant (`request.state.now`).
    setattr(app.state, SESSION_CLOCK_STATE, SystemClock())
    app.add_exception_handler(TurnedAway, _turned_away)
    app.add_exception_handler(backend.Missing, _missing)
    for router in ROUTERS:
        # A form field given twice with two values is refused before any route reads it.
        app.include_router(router, dependencies=[Depends(one_value_per_field)])
    # The routes as they are matched, for the page of a form a request was sent from.
    setattr(
        app.state,
        ROUTES_STATE,
        tuple(route for router in ROUTERS for route in router.routes if isinstance(route, Route)),
    )
    app.mount("/panel/static", StaticFiles(directory=STATIC_DIR), name="panel-static")
