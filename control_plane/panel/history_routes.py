"""The customer's history: runs and events paged back to the retention limit, their CSV export
for a range of days, and the agents per version night by night."""

from __future__ import annotations

from datetime import date
from typing import Literal
from uuid import UUID

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from control_plane.history import MAX_EXPORT_DAYS, MAX_NIGHTS, HistoryEvent, HistoryRun
from control_plane.panel import backend, customer_backend, history
from control_plane.panel.i18n import Language
from control_plane.panel.readers import customer_of
from control_plane.panel.web import (
    PREFIX,
    PanelContext,
    not_found,
    page,
    whole_number,
    with_headers,
)
from ground.contract.plain_text import shown

__all__ = ["router"]

router = APIRouter(prefix=PREFIX, include_in_schema=False)

# The nights the versions page offers; the default first.
NIGHT_CHOICES = (14, 7, MAX_NIGHTS)


@router.get("/history/runs.csv")
def export_runs(request: Request) -> Response:
    return _export(request, "runs")


@router.get("/history/events.csv")
def export_events(request: Request) -> Response:
    return _export(request, "events")


@router.get("/history/versions")
def versions(request: Request, nights: str = "") -> Response:
    ctx, org_id = customer_of(request)
    number = whole_number(nights)
    chosen = number if number in NIGHT_CHOICES else None
    error = (
        ctx.lang.gettext(
            "“%(value)s” is not one of the choices (%(choices)s).",
            value=shown(nights[:20]),
            choices=", ".join(str(n) for n in sorted(NIGHT_CHOICES)),
        )
        if nights and chosen is None
        else None
    )
    counted = chosen or NIGHT_CHOICES[0]
    platform = backend.platform(ctx.services)
    per_night = customer_backend.versions_per_night(
        ctx.services, org_id, nights=counted, zone=platform.zone, now=ctx.now
    )
    return page(
        ctx,
        "versions.html",
        status_code=400 if error else 200,
        chart=history.versions_chart(ctx.lang, per_night),
        nights=counted,
        night_choices=sorted(NIGHT_CHOICES),
        error=error,
    )


@router.get("/history/{what}")
def history_page(request: Request, what: str) -> Response:
    ctx, org_id = customer_of(request)
    if what not in ("runs", "events"):
        return not_found(ctx)
    chosen: Literal["runs", "events"] = "runs" if what == "runs" else "events"
    view = history.read_view(ctx.lang, chosen, request.query_params)
    return _history_page(ctx, org_id, view)


def _history_page(
    ctx: PanelContext,
    org_id: UUID,
    view: history.HistoryView,
    *,
    export_error: str | None = None,
) -> Response:
    """The view's page; a field that could not be read is said at the field (400) and left out."""
    platform = backend.platform(ctx.services)
    found = customer_backend.history_page(
        ctx.services, view.what, view.query(org_id, platform.zone)
    )
    agent_name = (
        customer_backend.agent_name(ctx.services, org_id, view.agent_id, now=ctx.now)
        if view.agent_id
        else None
    )
    return page(
        ctx,
        "history.html",
        status_code=400 if view.errors or export_error else 200,
        view=view,
        found=found,
        agent_name=agent_name,
        export_error=export_error,
        retention_days=platform.retention_days,
        max_export_days=MAX_EXPORT_DAYS,
        zone=platform.zone,
    )


def _export(request: Request, what: Literal["runs", "events"]) -> Response:
    ctx, org_id = customer_of(request)
    view = history.read_view(ctx.lang, what, request.query_params)
    if view.errors:
        return _history_page(ctx, org_id, view)
    zone = backend.platform(ctx.services).zone
    try:
        rows = customer_backend.export_history(ctx.services, what, view.query(org_id, zone))
    except backend.Refused:
        # The range is missing or too long: said where the range is chosen.
        return _history_page(ctx, org_id, view, export_error=_range_refused(ctx.lang, view))
    lines = (
        history.run_lines(r for r in rows if isinstance(r, HistoryRun))
        if what == "runs"
        else history.event_lines(e for e in rows if isinstance(e, HistoryEvent))
    )
    name = f"nachtwacht-{what}-{_day(view.first)}-{_day(view.last)}.csv"
    return with_headers(
        StreamingResponse(
            lines,
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )
    )


def _range_refused(lang: Language, view: history.HistoryView) -> str:
    """Why an export of the view's range makes no file: a day missing, or more days than an
    export holds (said with the days typed and how many they make)."""
    if view.first is None or view.last is None:
        return lang.ngettext(
            "An export needs a first and a last day, at most %(count)s day apart.",
            "An export needs a first and a last day, at most %(count)s days apart.",
            MAX_EXPORT_DAYS,
            count=lang.number(MAX_EXPORT_DAYS),
        )
    return lang.ngettext(
        "First day “%(first)s”, last day “%(last)s”: %(days)s days. An export holds at most"
        " %(count)s day.",
        "First day “%(first)s”, last day “%(last)s”: %(days)s days. An export holds at most"
        " %(count)s days.",
        MAX_EXPORT_DAYS,
        first=view.first.isoformat(),
        last=view.last.isoformat(),
        days=lang.number((view.last - view.first).days + 1),
        count=lang.number(MAX_EXPORT_DAYS),
    )


def _day(day: date | None) -> str:
    return day.isoformat() if day else ""
