"""The agent list's bulk actions: hold, end a hold, update now — for the agents ticked on the
page or for every agent of the view (see `fleet_list` for the number the button names). Each is
all or none, and one change per agent on the trail, named by the signed-in key. Done, each
redirects to the list as the browser showed it, which says the result (`flash`)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response
from starlette.datastructures import QueryParams

from control_plane.panel import (
    backend,
    customer_backend,
    fleet_list,
    rollout_backend,
    rollout_wording,
)
from control_plane.panel.customer_routes import agents_page, list_address
from control_plane.panel.flash import Done, redirect_with
from control_plane.panel.hold_routes import hold_start
from control_plane.panel.readers import Csrf, customer_post, parse_id
from control_plane.panel.web import PREFIX, not_found

__all__ = ["router"]

router = APIRouter(prefix=PREFIX, include_in_schema=False)


@router.post("/agents/bulk")
def bulk(
    request: Request,
    csrf: Csrf = "",
    action: Annotated[str, Form(max_length=20)] = "",
    target: Annotated[str, Form(max_length=20)] = "selected",
    agent: Annotated[list[str] | None, Form()] = None,
    until: Annotated[str, Form(max_length=40)] = "",
    # No bound of its own: a longer reason is answered at its field (`fleet_list.reason_problem`).
    reason: Annotated[str, Form()] = "",
    count: Annotated[str, Form(max_length=20)] = "",
    q: Annotated[str, Form()] = "",
    state: Annotated[str, Form()] = "",
    sort: Annotated[str, Form()] = "",
) -> Response:
    post = customer_post(request, csrf)
    ctx, org_id = post.ctx, post.org_id
    view = fleet_list.read_view(ctx.lang, QueryParams({"q": q, "state": state, "sort": sort}))
    ids = [parse_id(text) for text in (agent or [])[: fleet_list.MAX_SELECTED + 1]]
    chosen = next((name for name in fleet_list.BULK_ACTIONS if name == action), None)
    if None in ids or chosen is None or target not in {"selected", "matching"}:
        # Not something the page's form sends: the same answer as a bad id.
        return not_found(ctx)
    if view.query is None:
        return not_found(ctx)
    zone = backend.platform(ctx.services).zone
    form = fleet_list.bulk_action(
        ctx.lang,
        action=chosen,
        until_text=until,
        until=hold_start(until, zone),
        reason=reason,
        target=target,
        selected=[agent_id for agent_id in ids if agent_id is not None],
        now=ctx.now,
    )
    agent_ids = form.selected
    if not form.errors and target == "matching":
        agent_ids, moved = fleet_list.changed_count(
            ctx.services, ctx.lang, org_id, view.query, count, now=ctx.now
        )
        if moved is not None:
            form = _with_error(form, "count", moved)
    if form.errors:
        return agents_page(ctx, org_id, view, status_code=422, actions=form)
    actor = post.actor
    try:
        if form.action == "hold":
            assert form.until is not None
            held = rollout_backend.hold_agents(
                ctx.services,
                org_id,
                agent_ids,
                until=form.until,
                reason=form.reason,
                actor=actor,
                now=ctx.now,
            )
            done = Done("held", held, len(set(agent_ids)) - held, form.until.date())
        elif form.action == "release":
            ended = rollout_backend.end_holds(
                ctx.services, org_id, agent_ids, actor=actor, now=ctx.now
            )
            done = Done("released", ended, len(set(agent_ids)) - ended)
        else:
            asked = customer_backend.request_updates(
                ctx.services,
                org_id,
                agent_ids,
                post.session.credential_id,
                now=ctx.now,
                person=post.session.person,
            )
            done = Done("asked", asked.requested, asked.pending)
    except backend.Refused as exc:
        field: Literal["until", "reason"] = "reason" if exc.field == "reason" else "until"
        problem = rollout_wording.hold_problem(ctx.lang, field)
        return agents_page(
            ctx, org_id, view, status_code=422, actions=_with_error(form, field, problem)
        )
    return redirect_with(list_address(q, state, sort), done, secure=ctx.secure)


def _with_error(form: fleet_list.BulkAction, field: str, message: str) -> fleet_list.BulkAction:
    return fleet_list.BulkAction(
        action=form.action,
        until_text=form.until_text,
        reason=form.reason,
        until=form.until,
        selected=form.selected,
        errors={**form.errors, field: message},
    )
