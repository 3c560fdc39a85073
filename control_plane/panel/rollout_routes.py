"""The operators' rollout screens beyond the releases list: the notices inbox (halts), the
organisations, one organisation's agents with their pair, offer, pin and hold (and the
organisation's pin), and one agent (canary marking, its pin, a forced update with a reason).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from urllib.parse import urlencode
from uuid import UUID
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response
from starlette.datastructures import QueryParams

from control_plane.panel import (
    backend,
    customer_backend,
    fleet_list,
    rollout_backend,
)
from control_plane.panel.hold_routes import hold_start
from control_plane.panel.i18n import Language
from control_plane.panel.readers import Csrf, operator_of, operator_post, parse_id
from control_plane.panel.rollout_wording import MAX_FORCE_REASON
from control_plane.panel.web import PREFIX, PanelContext, not_found, page, redirect
from control_plane.pins.holds import MAX_HOLD, MAX_HOLD_REASON_LENGTH
from control_plane.pins.services import MAX_PIN_REASON_LENGTH
from ground.limits import MAX_VERSION_LENGTH

__all__ = ["router"]

router = APIRouter(prefix=PREFIX + "/operator", include_in_schema=False)

Reason = Annotated[str, Form(max_length=2000)]


@router.get("/notices")
def notices(request: Request) -> Response:
    ctx = operator_of(request)
    return page(
        ctx,
        "notices.html",
        notices=rollout_backend.notices(ctx.services),
        zone=backend.platform(ctx.services).zone,
    )


@router.post("/notices/{notice_id}/read")
def mark_notice_read(request: Request, notice_id: str, csrf: Csrf = "") -> Response:
    """Mark one notice read: the navigation's count of new notices goes down."""
    post = operator_post(request, csrf, notice_id)
    ctx, (parsed,) = post.ctx, post.ids
    rollout_backend.mark_notice_read(ctx.services, parsed, actor=post.actor, now=ctx.now)
    return redirect(f"{PREFIX}/operator/notices#notice-{parsed}")


@router.get("/orgs")
def orgs(request: Request) -> Response:
    ctx = operator_of(request)
    return page(ctx, "orgs.html", orgs=rollout_backend.operator_orgs(ctx.services))


def _org_page(
    ctx: PanelContext,
    org_id: UUID,
    view: fleet_list.FleetView,
    *,
    status_code: int = 200,
    pin_error: str | None = None,
    saved: str | None = None,
) -> Response:
    """The organisation's pin, its agents at a glance (per state, per coming slot) and one page
    of its agents in the view the URL names (the customer's list's search, states, orders and
    pages): an organisation of thousands costs one page, never a row per agent."""
    view, overview = fleet_list.fleet_page(ctx.services, ctx.lang, org_id, view, now=ctx.now)
    listed = overview.agents if overview else ()
    releases = rollout_backend.agent_releases(
        ctx.services, org_id, now=ctx.now, agent_ids=[a.id for a in listed]
    )
    pins = rollout_backend.pins(ctx.services)
    settings = backend.platform(ctx.services)
    return page(
        ctx,
        "org.html",
        status_code=400 if view.errors and status_code == 200 else status_code,
        org_id=org_id,
        org_name=rollout_backend.org_names(ctx.services).get(org_id, str(org_id)),
        view=view,
        overview=overview,
        agents=listed,
        summary=fleet_list.fleet_summary(ctx.services, org_id, now=ctx.now),
        releases=releases,
        next_slots=customer_backend.listed_next_slots(listed, releases, settings),
        state_choices=fleet_list.STATE_CHOICES,
        sort_choices=fleet_list.SORT_CHOICES,
        org_pin=next((p for p in pins if p.org_id == org_id), None),
        agent_pins={p.agent_id: p for p in pins if p.agent_id is not None},
        pin_error=pin_error,
        saved=saved,
        zone=settings.zone,
        now=ctx.now,
        max_reason=MAX_PIN_REASON_LENGTH,
        max_version=MAX_VERSION_LENGTH,
    )


@router.get("/orgs/{org_id}")
def org(request: Request, org_id: str, saved: str | None = None) -> Response:
    ctx = operator_of(request)
    parsed = parse_id(org_id)
    if parsed is None:
        return not_found(ctx)
    view = fleet_list.read_view(ctx.lang, request.query_params)
    return _org_page(ctx, parsed, view, saved=saved if saved in {"pin", "unpin"} else None)


def _pin_fields(version: str, reason: str, hold_at_running: str | None) -> tuple[str | None, str]:
    """The pin form's version (None: hold at what it runs) and its reason; `field` errors raise
    `backend.Refused` naming the field, the way the service does."""
    version = version.strip()
    reason = reason.strip()
    if hold_at_running is None and not version:
        raise backend.Refused("version", version)
    if len(version) > MAX_VERSION_LENGTH:
        raise backend.Refused("version", version)
    if not reason or len(reason) > MAX_PIN_REASON_LENGTH:
        raise backend.Refused("reason", reason)
    return (None if hold_at_running is not None else version), reason


@router.post("/orgs/{org_id}/pin")
def pin_org(
    request: Request,
    org_id: str,
    csrf: Csrf = "",
    action: Annotated[str, Form(max_length=20)] = "pin",
    version: Annotated[str, Form(max_length=200)] = "",
    hold_at_running: Annotated[str | None, Form(max_length=10)] = None,
    reason: Reason = "",
) -> Response:
    post = operator_post(request, csrf, org_id)
    ctx, (parsed,) = post.ctx, post.ids
    actor = post.actor
    try:
        if action == "unpin":
            rollout_backend.unpin(ctx.services, org_id=parsed, actor=actor, now=ctx.now)
        else:
            pinned, why = _pin_fields(version, reason, hold_at_running)
            rollout_backend.pin(
                ctx.services, org_id=parsed, version=pinned, reason=why, actor=actor, now=ctx.now
            )
    except backend.Refused as exc:
        view = fleet_list.read_view(ctx.lang, QueryParams())
        return _org_page(ctx, parsed, view, status_code=422, pin_error=exc.field)
    done = "unpin" if action == "unpin" else "pin"
    return redirect(f"{PREFIX}/operator/orgs/{parsed}?" + urlencode({"saved": done}))


def _agent_page(
    ctx: PanelContext,
    org_id: UUID,
    agent_id: UUID,
    *,
    status_code: int = 200,
    error: str | None = None,
    error_message: str | None = None,
    saved: str | None = None,
    hold_form: dict[str, str] | None = None,
) -> Response:
    detail = customer_backend.agent_detail(ctx.services, org_id, agent_id, now=ctx.now)
    pins = rollout_backend.pins(ctx.services)
    return page(
        ctx,
        "operator_agent.html",
        status_code=status_code,
        org_id=org_id,
        agent=detail.page,
        release=detail.release,
        agent_pin=next((p for p in pins if p.agent_id == agent_id), None),
        org_pin=next((p for p in pins if p.org_id == org_id), None),
        error=error,
        # What is wrong, when the check said it (else the template words `error`).
        error_message=error_message,
        saved=saved,
        zone=backend.platform(ctx.services).zone,
        max_reason=MAX_PIN_REASON_LENGTH,
        max_force_reason=MAX_FORCE_REASON,
        max_hold_days=MAX_HOLD.days,
        max_hold_reason=MAX_HOLD_REASON_LENGTH,
        hold_form=hold_form or {},
        max_version=MAX_VERSION_LENGTH,
    )


AGENT_SAVED = frozenset({"canary", "pin", "unpin", "forced", "hold", "unhold"})
AGENT_ACTIONS = frozenset({"canary", "pin", "unpin", "force", "hold", "unhold"})


@router.get("/orgs/{org_id}/agents/{agent_id}")
def agent(request: Request, org_id: str, agent_id: str, saved: str | None = None) -> Response:
    ctx = operator_of(request)
    org, found = parse_id(org_id), parse_id(agent_id)
    if org is None or found is None:
        return not_found(ctx)
    return _agent_page(ctx, org, found, saved=saved if saved in AGENT_SAVED else None)


class _ReasonRefused(backend.Refused):
    """A hold's reason refused by the customer's hold's check, with what it says is wrong."""

    def __init__(self, value: str, message: str) -> None:
        super().__init__("reason", value)
        self.message = message


def _hold_fields(lang: Language, until: str, reason: str, zone: ZoneInfo) -> tuple[datetime, str]:
    """The hold form's end (the chosen day's first moment in the platform's zone, as for a
    customer's hold) and its reason, checked as a customer's is (`fleet_list.reason_problem`);
    the service checks the day's bounds."""
    ends = hold_start(until, zone)
    if ends is None:
        raise backend.Refused("until", until)
    problem = fleet_list.reason_problem(lang, reason)
    if problem is not None:
        raise _ReasonRefused(reason, problem)
    return ends, reason.strip()


@router.post("/orgs/{org_id}/agents/{agent_id}")
def agent_action(
    request: Request,
    org_id: str,
    agent_id: str,
    csrf: Csrf = "",
    action: Annotated[str, Form(max_length=20)] = "",
    canary: Annotated[str | None, Form(max_length=10)] = None,
    version: Annotated[str, Form(max_length=200)] = "",
    hold_at_running: Annotated[str | None, Form(max_length=10)] = None,
    # No bound of its own: each action answers a reason too long at its field, in the reader's
    # language, as the customer's hold form does (the request's body limit still applies).
    reason: Annotated[str, Form()] = "",
    until: Annotated[str, Form(max_length=40)] = "",
) -> Response:
    """The operator agent page's forms: `canary`, `pin`, `unpin`, `force`, `hold`, `unhold`."""
    post = operator_post(request, csrf, org_id, agent_id, known=action in AGENT_ACTIONS)
    ctx, (org, found) = post.ctx, post.ids
    actor = post.actor
    try:
        # Scoped to the organisation in the URL: another organisation's agent is not found.
        rollout_backend.agent_release(ctx.services, found, org_id=org, now=ctx.now)
        if action == "canary":
            rollout_backend.mark_canary(
                ctx.services, found, canary=canary is not None, actor=actor, now=ctx.now
            )
        elif action == "pin":
            pinned, why = _pin_fields(version, reason, hold_at_running)
            rollout_backend.pin(
                ctx.services, agent_id=found, version=pinned, reason=why, actor=actor, now=ctx.now
            )
        elif action == "unpin":
            rollout_backend.unpin(ctx.services, agent_id=found, actor=actor, now=ctx.now)
        elif action == "hold":
            zone = backend.platform(ctx.services).zone
            ends, why = _hold_fields(ctx.lang, until, reason, zone)
            rollout_backend.hold_agent(
                ctx.services,
                org,
                found,
                until=ends,
                reason=why,
                actor=actor,
                now=ctx.now,
                set_by="operator",
            )
        elif action == "unhold":
            rollout_backend.end_hold(ctx.services, org, found, actor=actor, now=ctx.now)
        else:
            why = reason.strip()
            if not why or len(why) > MAX_FORCE_REASON:
                raise backend.Refused("force_reason", why)
            rollout_backend.force_update(ctx.services, found, reason=why, actor=actor, now=ctx.now)
    except backend.Refused as exc:
        field = {
            "pin": exc.field,
            "force": "force_reason",
            "hold": "hold_reason" if exc.field == "reason" else "hold_until",
        }.get(action, action)
        return _agent_page(
            ctx,
            org,
            found,
            status_code=422,
            error=field,
            error_message=exc.message if isinstance(exc, _ReasonRefused) else None,
            hold_form={"until": until[:40], "reason": reason[:MAX_HOLD_REASON_LENGTH]},
        )
    done = "forced" if action == "force" else action
    return redirect(f"{PREFIX}/operator/orgs/{org}/agents/{found}?" + urlencode({"saved": done}))
