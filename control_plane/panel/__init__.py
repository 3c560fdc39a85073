"""The panel: the customer's and the operator's screens, server-rendered, in nine languages.

    backend.py          the one door into the control plane's services (only this file calls them);
                        the sign-in sessions are the accounts domain's `SessionService`
    csrf.py             the forms' CSRF tokens (derived from the session's secret)
    i18n.py             the nine languages: catalogs compiled at start, choice, CLDR formatting
    wording.py          the core's facts (problems, DST kinds, run states, events) said per language
    schedule_editor.py  the editor's rows, the problem next to its row, the preview of the nights
    charts.py           SVG pictures drawn on the server
    web.py              shared by every page: context, rendering, security headers
    signin_routes.py    sign in/out, the language menu;  customer_routes.py, operator_routes.py
    templates/ static/ locales/    Jinja2 pages, CSS and the one small script, the .po catalogs

`mount_panel(app)` adds the routes under /panel/ and the static files; docs/panel.md tells more.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from control_plane.panel import customer_routes, operator_routes, signin_routes

__all__ = ["STATIC_DIR", "mount_panel"]

STATIC_DIR = Path(__file__).resolve().parent / "static"


def mount_panel(app: FastAPI) -> None:
    app.include_router(signin_routes.router)
    app.include_router(customer_routes.router)
    app.include_router(operator_routes.router)
    app.mount("/panel/static", StaticFiles(directory=STATIC_DIR), name="panel-static")
