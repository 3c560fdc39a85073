"""The organisation's default schedule: the one its new agents take when they enrol. Changing it
changes no agent already enrolled (the page says so; the agent list's bulk schedule does that)."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from control_plane.panel import backend, customer_backend, fleet_list
from control_plane.panel.readers import Csrf, customer_of, customer_post
from control_plane.panel.web import PREFIX, PanelContext, WholeNumber, page, redirect

__all__ = ["router"]

router = APIRouter(prefix=PREFIX, include_in_schema=False)


def _page(
    ctx: PanelContext,
    org_id: UUID,
    *,
    enabled: bool | None = None,
    times_text: str | None = None,
    error: str | None = None,
    saved: bool = False,
) -> Response:
    current = customer_backend.default_schedule(ctx.services, org_id).schedule
    if times_text is None:
        times_text = ", ".join(current.times) if current is not None else ""
    if enabled is None:
        enabled = current is None or current.enabled
    return page(
        ctx,
        "default_schedule.html",
        status_code=422 if error else 200,
        current=current,
        enabled=enabled,
        times_text=times_text,
        error=error,
        saved=saved,
        zone=backend.platform(ctx.services).zone,
    )


@router.get("/default-schedule")
def default_schedule(request: Request, saved: WholeNumber = 0) -> Response:
    ctx, org_id = customer_of(request)
    return _page(ctx, org_id, saved=bool(saved))


@router.post("/default-schedule")
def save_default_schedule(
    request: Request,
    csrf: Csrf = "",
    enabled: Annotated[str | None, Form()] = None,
    times: Annotated[str, Form()] = "",
) -> Response:
    post = customer_post(request, csrf)
    ctx, org_id = post.ctx, post.org_id
    text, editor, problem = fleet_list.typed_schedule(
        ctx.lang, enabled=enabled is not None, times_text=times
    )
    if problem is not None:
        return _page(ctx, org_id, enabled=editor.enabled, times_text=text, error=problem)
    try:
        customer_backend.save_default_schedule(
            ctx.services,
            org_id,
            enabled=editor.enabled,
            times=list(editor.times),
            now=ctx.now,
            actor=post.actor,
        )
    except backend.Refused:
        unread = ctx.lang.gettext("The list of times could not be read.")
        return _page(ctx, org_id, enabled=editor.enabled, times_text=text, error=unread)
    return redirect(f"{PREFIX}/default-schedule?saved=1")
