"""A customer's hold of one agent: its scheduled updates skipped until a date (with a reason),
and ending it. The date is a day in the platform's time zone: the hold ends as that day begins,
so "until 5 December" means the night into 5 December runs again.
"""

from __future__ import annotations

from datetime import UTC, datetime, time
from typing import Annotated
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from control_plane.panel import backend, fleet_list, rollout_backend, rollout_wording
from control_plane.panel.customer_routes import agent_page
from control_plane.panel.readers import Csrf, customer_post
from control_plane.panel.web import PREFIX, redirect
from control_plane.pins.holds import MAX_HOLD_REASON_LENGTH
from ground.instants import parse_day_text

__all__ = ["hold_start", "router"]

router = APIRouter(prefix=PREFIX, include_in_schema=False)


def hold_start(text: str, zone: ZoneInfo) -> datetime | None:
    """The instant a hold "until <day>" ends: the day's first moment in the zone; None when the
    text is not a day (YYYY-MM-DD, as the date field sends it)."""
    try:
        day = parse_day_text(text.strip())
        start = datetime.combine(day, time(0, 0), tzinfo=zone)
        # The calendar's first day in a zone ahead of UTC began before any instant a datetime
        # holds: it is no day a hold can end on, said like every day out of range.
        start.astimezone(UTC)
    except (ValueError, OverflowError):
        return None
    return start


@router.post("/agents/{agent_id}/hold")
def hold(
    request: Request,
    agent_id: str,
    csrf: Csrf = "",
    until: Annotated[str, Form(max_length=40)] = "",
    # No bound of its own: a longer reason is answered at its field, in the reader's language
    # (the request's body limit still applies).
    reason: Annotated[str, Form()] = "",
) -> Response:
    post = customer_post(request, csrf, agent_id)
    ctx, org_id, (parsed,) = post.ctx, post.org_id, post.ids
    form = {"until": until[:40], "reason": reason[:MAX_HOLD_REASON_LENGTH]}
    zone = backend.platform(ctx.services).zone
    ends = hold_start(until, zone)
    error = None
    message = None
    if ends is None:
        error = "until"
    else:
        message = fleet_list.reason_problem(ctx.lang, reason)
        if message is not None:
            error = "reason"
    reason = reason.strip()
    if error is None and ends is not None:
        try:
            rollout_backend.hold_agent(
                ctx.services,
                org_id,
                parsed,
                until=ends,
                reason=reason,
                actor=post.actor,
                now=ctx.now,
            )
        except backend.Refused as exc:
            error = exc.field if exc.field in {"until", "reason"} else "until"
    if error is not None:
        if message is None:
            message = rollout_wording.hold_problem(
                ctx.lang, "reason" if error == "reason" else "until"
            )
        return agent_page(
            ctx,
            org_id,
            parsed,
            status_code=422,
            hold_error=error,
            hold_message=message,
            hold_form=form,
        )
    return redirect(f"{PREFIX}/agents/{parsed}?" + urlencode({"held": "set"}) + "#hold")


@router.post("/agents/{agent_id}/hold/end")
def end_hold(request: Request, agent_id: str, csrf: Csrf = "") -> Response:
    post = customer_post(request, csrf, agent_id)
    ctx, org_id, (parsed,) = post.ctx, post.org_id, post.ids
    rollout_backend.end_hold(ctx.services, org_id, parsed, actor=post.actor, now=ctx.now)
    return redirect(f"{PREFIX}/agents/{parsed}?" + urlencode({"held": "ended"}) + "#hold")
