"""The customer's screens: agents, one agent (schedule, preview, runs, timeline, update now),
notifications, the webhook, the forecast."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated
from urllib.parse import urlencode
from uuid import UUID

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response
from starlette.datastructures import QueryParams

from control_plane.agents.agent_list import ScheduleChanges
from control_plane.panel import (
    backend,
    customer_backend,
    event_wording,
    fleet_list,
    operator_backend,
    rollout_backend,
    wording,
)
from control_plane.panel.charts import Bar
from control_plane.panel.flash import (
    DONE_COOKIE,
    Done,
    done_text,
    forget_done,
    redirect_with,
    take_done,
)
from control_plane.panel.i18n import Language
from control_plane.panel.once import Once, made_once
from control_plane.panel.readers import Csrf, customer_of, customer_post, parse_id
from control_plane.panel.schedule_editor import EditorState, check_rows, editor_preview
from control_plane.panel.tonight import tonight
from control_plane.panel.web import (
    PREFIX,
    PanelContext,
    WholeNumber,
    forecast_chart,
    not_found,
    page,
    redirect,
)
from control_plane.pins.holds import MAX_HOLD
from ground.contract.plain_text import shown

__all__ = ["agent_page", "agents_page", "list_address", "router"]

router = APIRouter(prefix=PREFIX, include_in_schema=False)


@router.get("/agents")
def agents(request: Request) -> Response:
    ctx, org_id = customer_of(request)
    view = fleet_list.read_view(ctx.lang, request.query_params)
    # A bulk form's result, said once after its redirect.
    done = take_done(request)
    if done is None:
        response = _agents_page(ctx, org_id, view)
    elif done.kind == "schedules":
        changes = ScheduleChanges(changed=done.first, unchanged=done.second)
        response = _agents_page(ctx, org_id, view, changes=changes)
    else:
        response = _agents_page(ctx, org_id, view, done=done_text(ctx.lang, done))
    if DONE_COOKIE in request.cookies:
        forget_done(response, secure=ctx.secure)
    return response


def list_address(q: str, state: str, sort: str) -> str:
    """The list's address for the view a form was sent from (its values escaped)."""
    shown = {name: value for name, value in (("q", q), ("state", state), ("sort", sort)) if value}
    return f"{PREFIX}/agents" + (f"?{urlencode(shown)}" if shown else "")


def _agents_page(
    ctx: PanelContext,
    org_id: UUID,
    view: fleet_list.FleetView,
    *,
    status_code: int = 200,
    bulk: fleet_list.BulkSchedule | None = None,
    changes: ScheduleChanges | None = None,
    actions: fleet_list.BulkAction | None = None,
    done: str | None = None,
) -> Response:
    """The agent list in the view the URL names; a bad field is answered at the field (400)."""
    view, overview = fleet_list.fleet_page(ctx.services, ctx.lang, org_id, view, now=ctx.now)
    listed = overview.agents if overview else ()
    releases = rollout_backend.agent_releases(
        ctx.services, org_id, now=ctx.now, agent_ids=[a.id for a in listed]
    )
    settings = backend.platform(ctx.services)
    return page(
        ctx,
        "agents.html",
        status_code=400 if view.errors else status_code,
        view=view,
        overview=overview,
        agents=listed,
        releases=releases,
        next_slots=customer_backend.listed_next_slots(listed, releases, settings),
        state_choices=fleet_list.STATE_CHOICES,
        sort_choices=fleet_list.SORT_CHOICES,
        bulk=bulk,
        changes=changes,
        actions=actions,
        done=done,
        max_hold_days=MAX_HOLD_DAYS,
        zone=settings.zone,
        now=ctx.now,
    )


@router.post("/agents/schedules")
def save_schedules(
    request: Request,
    csrf: Csrf = "",
    enabled: Annotated[str | None, Form()] = None,
    times: Annotated[str, Form()] = "",
    target: Annotated[str, Form(max_length=20)] = "selected",
    agent: Annotated[list[str] | None, Form()] = None,
    q: Annotated[str, Form()] = "",
    state: Annotated[str, Form()] = "",
    sort: Annotated[str, Form()] = "",
    count: Annotated[str, Form(max_length=20)] = "",
) -> Response:
    """One schedule for the agents ticked on the page, or for every agent of the view (all its
    pages, when it still finds the `count` agents its button named): a change on the trail per
    agent whose schedule changed."""
    post = customer_post(request, csrf)
    ctx, org_id = post.ctx, post.org_id
    view = fleet_list.read_view(ctx.lang, QueryParams({"q": q, "state": state, "sort": sort}))
    ids = [parse_id(text) for text in (agent or [])[: fleet_list.MAX_SELECTED + 1]]
    if None in ids or target not in {"selected", "matching"} or view.query is None:
        # Not something the page's form sends: the same answer as a bad id.
        return not_found(ctx)
    form = fleet_list.bulk_schedule(
        ctx.lang,
        enabled=enabled is not None,
        times_text=times,
        target=target,
        selected=[agent_id for agent_id in ids if agent_id is not None],
    )
    if not form.errors and target == "matching":
        _, moved = fleet_list.changed_count(
            ctx.services, ctx.lang, org_id, view.query, count, now=ctx.now
        )
        if moved is not None:
            form = replace(form, errors={"agent": moved})
    if form.errors:
        return _agents_page(ctx, org_id, view, status_code=422, bulk=form)
    try:
        changes = fleet_list.set_schedules(
            ctx.services,
            org_id,
            form,
            query=view.query if target == "matching" else None,
            now=ctx.now,
            actor=post.actor,
        )
    except backend.Refused:
        unread = replace(
            form, errors={"times": ctx.lang.gettext("The list of times could not be read.")}
        )
        return _agents_page(ctx, org_id, view, status_code=422, bulk=unread)
    done = Done("schedules", changes.changed, changes.unchanged)
    return redirect_with(list_address(q, state, sort), done, secure=ctx.secure)


def _agent_page(
    ctx: PanelContext,
    org_id: UUID,
    agent_id: UUID,
    editor: EditorState | None = None,
    *,
    status_code: int = 200,
    saved: bool = False,
    requested: bool = False,
    hold_error: str | None = None,
    hold_message: str | None = None,
    hold_form: dict[str, str] | None = None,
    held: str | None = None,
    update_refused: bool = False,
) -> Response:
    detail = customer_backend.agent_detail(ctx.services, org_id, agent_id, now=ctx.now)
    platform = backend.platform(ctx.services)
    if editor is None:
        schedule = detail.page.schedule
        editor = check_rows(ctx.lang, enabled=schedule.enabled, rows=list(schedule.times))
    nights = editor_preview(ctx.lang, editor, zone=platform.zone, now=ctx.now)
    return page(
        ctx,
        "agent.html",
        status_code=status_code,
        agent=detail.page,
        runs=detail.page.latest_runs,
        events=detail.events,
        now=ctx.now,
        editor=editor,
        nights=nights,
        zone=platform.zone,
        catch_up=wording.catch_up_text(ctx.lang, platform.catch_up_minutes),
        saved=saved,
        requested=requested,
        release=detail.release,
        hold_error=hold_error,
        hold_message=hold_message,
        hold_form=hold_form or {},
        held=held,
        update_refused=update_refused,
        max_hold_days=MAX_HOLD_DAYS,
    )


# The agent page, for the hold's routes (`hold_routes`); the list, for the bulk actions'.
agent_page = _agent_page
agents_page = _agents_page
# A hold is a pause of at most this many days (the pins domain's bound).
MAX_HOLD_DAYS = MAX_HOLD.days


@router.get("/agents/{agent_id}")
def agent(
    request: Request,
    agent_id: str,
    saved: WholeNumber = 0,
    requested: WholeNumber = 0,
    held: str | None = None,
) -> Response:
    ctx, org_id = customer_of(request)
    parsed = parse_id(agent_id)
    if parsed is None:
        return not_found(ctx)
    return _agent_page(
        ctx,
        org_id,
        parsed,
        saved=bool(saved),
        requested=bool(requested),
        held=held if held in {"set", "ended"} else None,
    )


@router.post("/agents/{agent_id}/schedule")
def save_schedule(
    request: Request,
    agent_id: str,
    csrf: Csrf = "",
    enabled: Annotated[str | None, Form()] = None,
    times: Annotated[list[str] | None, Form()] = None,
    action: Annotated[str, Form()] = "save",
    remove: Annotated[WholeNumber | None, Form()] = None,
) -> Response:
    post = customer_post(request, csrf, agent_id)
    ctx, org_id, (parsed,) = post.ctx, post.org_id, post.ids
    rows = [row[:20] for row in (times or [])]
    if remove is not None and 0 <= remove < len(rows):
        del rows[remove]
        action = "edit"
    if action == "add":
        rows.append("")
    editor = check_rows(ctx.lang, enabled=enabled is not None, rows=rows)
    if action != "save":
        # Adding or removing a row is not saving: the reader sees the edit and saves when done.
        return _agent_page(ctx, org_id, parsed, editor)
    if editor.has_errors:
        return _agent_page(ctx, org_id, parsed, editor, status_code=422)
    try:
        customer_backend.save_schedule(
            ctx.services,
            org_id,
            parsed,
            enabled=editor.enabled,
            times=editor.times,
            now=ctx.now,
            actor=post.actor,
        )
    except backend.Refused:
        failed = EditorState(
            enabled=editor.enabled,
            rows=editor.rows,
            row_errors={},
            list_error=ctx.lang.gettext("The list of times could not be read."),
        )
        return _agent_page(ctx, org_id, parsed, failed, status_code=422)
    return redirect(f"{PREFIX}/agents/{parsed}?saved=1")


@router.get("/agents/{agent_id}/preview")
def schedule_preview(
    request: Request,
    agent_id: str,
    enabled: str | None = None,
) -> Response:
    """The preview alone, for the editor's live update while typing (read-only, so a GET)."""
    ctx, _ = customer_of(request)
    raw = request.query_params.getlist("times")[:289]
    editor = check_rows(ctx.lang, enabled=enabled is not None, rows=[r[:20] for r in raw])
    platform = backend.platform(ctx.services)
    nights = editor_preview(ctx.lang, editor, zone=platform.zone, now=ctx.now)
    del agent_id  # the preview depends only on the times; the URL keeps it beside its agent
    return page(ctx, "_preview.html", editor=editor, nights=nights)


@router.post("/agents/{agent_id}/update")
def update_now(request: Request, agent_id: str, csrf: Csrf = "") -> Response:
    post = customer_post(request, csrf, agent_id)
    ctx, org_id, (parsed,) = post.ctx, post.org_id, post.ids
    if rollout_backend.agent_release(ctx.services, parsed, org_id=org_id, now=ctx.now).hold:
        # A held agent's claim is refused, so a request would wait on its page for nothing (a
        # page opened before the hold still has the button): nothing is asked, the page says why.
        return _agent_page(ctx, org_id, parsed, status_code=409, update_refused=True)
    session = post.session
    recorded = customer_backend.request_update(
        ctx.services,
        org_id,
        parsed,
        session.credential_id,
        now=ctx.now,
        person=session.person,
    )
    # The reader follows the update on its own page (a second click joins the same request).
    return redirect(f"{PREFIX}/agents/{parsed}/updates/{recorded.run.run_id}")


@router.get("/notifications")
def notifications(request: Request) -> Response:
    ctx, org_id = customer_of(request)
    inbox = customer_backend.notifications(ctx.services, org_id)
    zone = backend.platform(ctx.services).zone
    return page(
        ctx,
        "notifications.html",
        unread=inbox.unread,
        items=inbox.notifications,
        zone=zone,
    )


@router.post("/notifications/{notification_id}/read")
def mark_notification(
    request: Request,
    notification_id: str,
    csrf: Csrf = "",
    read: Annotated[str, Form()] = "1",
) -> Response:
    post = customer_post(request, csrf, notification_id)
    ctx, org_id, (parsed,) = post.ctx, post.org_id, post.ids
    customer_backend.mark_notification(ctx.services, org_id, parsed, read == "1", now=ctx.now)
    return redirect(f"{PREFIX}/notifications")


def _webhook_page(
    ctx: PanelContext,
    org_id: UUID,
    *,
    error_field: str | None = None,
    url: str = "",
    secret_shown: str | None = None,
    status_code: int = 200,
    saved: bool = False,
    sent_again: bool = False,
) -> Response:
    current = customer_backend.webhook(ctx.services, org_id)
    last_test = customer_backend.last_webhook_test(ctx.services, org_id) if current else None
    return page(
        ctx,
        "webhook.html",
        status_code=status_code,
        webhook=current,
        url=url or (current.url if current else ""),
        # The refused address named in its refusal: its controls shown, not obeyed.
        url_quoted=shown(url),
        error_field=error_field,
        secret_shown=secret_shown,
        saved=saved,
        sent_again=sent_again,
        last_test=last_test,
        test_text=event_wording.webhook_test_text(ctx.lang, last_test) if last_test else None,
        zone=backend.platform(ctx.services).zone,
    )


@router.get("/webhook")
def webhook(request: Request) -> Response:
    ctx, org_id = customer_of(request)
    return _webhook_page(ctx, org_id)


@router.post("/webhook")
def save_webhook(
    request: Request,
    csrf: Csrf = "",
    url: Annotated[str, Form(max_length=2100)] = "",
    secret: Annotated[str, Form(max_length=300)] = "",
    action: Annotated[str, Form()] = "save",
    once: Once = "",
) -> Response:
    post = customer_post(request, csrf)
    ctx, org_id = post.ctx, post.org_id
    if action == "delete":
        customer_backend.delete_webhook(ctx.services, org_id)
        return redirect(f"{PREFIX}/webhook")
    try:
        # A generated secret is shown once: a resend replaces neither it nor the address.
        saved = made_once(
            ctx.services,
            once,
            lambda: (
                customer_backend.save_webhook(
                    ctx.services, org_id, url, secret or None, now=ctx.now
                ),
            ),
            now=ctx.now,
        )
    except backend.Refused as exc:
        return _webhook_page(ctx, org_id, error_field=exc.field, url=url, status_code=422)
    if saved is None:  # the form was answered already (`once.py`)
        return _webhook_page(ctx, org_id, status_code=409, sent_again=True)
    (generated,) = saved
    return _webhook_page(ctx, org_id, secret_shown=generated, saved=True)


@router.post("/webhook/test")
def test_webhook(request: Request, csrf: Csrf = "") -> Response:
    """Send a signed test delivery now, then a redirect to the webhook's page, which shows what
    came of it from the trail: a reload shows the page again and sends nothing."""
    post = customer_post(request, csrf)
    ctx, org_id = post.ctx, post.org_id
    try:
        customer_backend.send_webhook_test(ctx.services, org_id, actor=post.actor, now=ctx.now)
    except backend.Missing:
        return _webhook_page(ctx, org_id, status_code=409)
    return redirect(f"{PREFIX}/webhook#test-result")


@router.get("/forecast")
def forecast(request: Request) -> Response:
    ctx, org_id = customer_of(request)
    zone = backend.platform(ctx.services).zone
    night = tonight(ctx.now, zone)
    slots = operator_backend.org_forecast(ctx.services, org_id, night.day).slots
    chart = forecast_chart(
        ctx,
        night.day,
        [
            Bar(
                label=ctx.lang.time_with_zone(slot.at, zone),
                total=slot.agents,
                part=slot.can_update,
                # The organisation's own cap over the window: what it can be served at most.
                limit=slot.org_capacity,
            )
            for slot in slots
        ],
    )
    next_round = operator_backend.org_next_round(ctx.services, org_id, ctx.now)
    return page(
        ctx,
        "forecast.html",
        chart=chart,
        slots=slots,
        zone=zone,
        night=night,
        next_round=next_round,
        size=lambda n: _size(ctx.lang, n),
    )


def _size(lang: Language, count: int) -> str:
    """A byte count in decimal units, one decimal: a patch is often below a megabyte."""
    if count < 1_000_000:
        return lang.gettext("%(size)s kB", size=lang.number(round(count / 1_000, 1)))
    return lang.gettext("%(size)s MB", size=lang.number(round(count / 1_000_000, 1)))
