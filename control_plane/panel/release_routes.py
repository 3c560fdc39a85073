"""The operators' releases: per (channel, platform) the current and previous release, withdrawn
ones with their reason and the agents still running them, and withdrawing (a reason required).

Beside each release its rollout (`rollout_backend.release_states`): the stage (canary →
everyone), the halt in force (by whom or by the control plane itself, why, the runs that tripped
it) and its own brake; one form per release, a reason required, promotes, halts, resumes, or
engages or releases its brake.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode
from uuid import UUID

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from control_plane.panel import backend, operator_backend, rollout_backend
from control_plane.panel.readers import Csrf, operator_of, operator_post
from control_plane.panel.web import PREFIX, PanelContext, page, redirect
from control_plane.releases.withdrawal import MAX_WITHDRAW_REASON_LENGTH, ReleaseTrackView

__all__ = ["ROLLOUT_ACTIONS", "previous_release_ids", "router"]

# The rollout form's buttons; each needs a reason (the trail keeps it).
ROLLOUT_ACTIONS = ("promote", "halt", "resume", "brake", "unbrake")
MAX_ROLLOUT_REASON = 500

router = APIRouter(prefix=PREFIX + "/operator", include_in_schema=False)


def previous_release_ids(track: ReleaseTrackView) -> set[UUID]:
    """The release a pair falls back to when its current one is withdrawn: the newest release
    below the current one that is not withdrawn."""
    seen_current = False
    for entry in track.releases:  # newest first
        if entry.current:
            seen_current = True
        elif seen_current and entry.withdrawn_at is None:
            return {entry.id}
    return set()


def _releases_page(
    ctx: PanelContext,
    *,
    status_code: int = 200,
    error_release: UUID | None = None,
    withdrawn: str | None = None,
    rollout_error: tuple[UUID, str] | None = None,
    done: str | None = None,
) -> Response:
    listed = operator_backend.releases(ctx.services)
    previous: set[UUID] = set()
    for track in listed.tracks:
        previous |= previous_release_ids(track)
    return page(
        ctx,
        "releases.html",
        status_code=status_code,
        tracks=listed.tracks,
        previous=previous,
        error_release=error_release,
        withdrawn=withdrawn,
        zone=backend.platform(ctx.services).zone,
        max_reason=MAX_WITHDRAW_REASON_LENGTH,
        max_rollout_reason=MAX_ROLLOUT_REASON,
        states=rollout_backend.release_states(ctx.services, listed, now=ctx.now),
        rollout_error=rollout_error,
        done=done,
        org_names=rollout_backend.org_names(ctx.services),
        unverifiable=operator_backend.unverifiable_releases(ctx.services),
    )


@router.get("/releases")
def releases(request: Request, withdrawn: str | None = None, done: str | None = None) -> Response:
    ctx = operator_of(request)
    return _releases_page(
        ctx,
        withdrawn=(withdrawn or "")[:100] or None,
        done=done if done in ROLLOUT_ACTIONS else None,
    )


@router.post("/releases/{release_id}/withdraw")
def withdraw(
    request: Request,
    release_id: str,
    csrf: Csrf = "",
    reason: Annotated[str, Form(max_length=2000)] = "",
) -> Response:
    post = operator_post(request, csrf, release_id)
    ctx, (parsed,) = post.ctx, post.ids
    reason = reason.strip()
    if not reason or len(reason) > MAX_WITHDRAW_REASON_LENGTH:
        return _releases_page(ctx, status_code=422, error_release=parsed)
    try:
        done = operator_backend.withdraw_release(
            ctx.services, parsed, reason=reason, actor=post.actor, now=ctx.now
        )
    except backend.Refused:
        return _releases_page(ctx, status_code=409, error_release=parsed)
    return redirect(f"{PREFIX}/operator/releases?" + urlencode({"withdrawn": done.version}))


@router.post("/releases/{release_id}/rollout")
def rollout(
    request: Request,
    release_id: str,
    csrf: Csrf = "",
    action: Annotated[str, Form(max_length=20)] = "",
    reason: Annotated[str, Form(max_length=2000)] = "",
) -> Response:
    """Promote, halt, resume, brake or release the brake of one release; a reason required."""
    post = operator_post(request, csrf, release_id, known=action in ROLLOUT_ACTIONS)
    ctx, (parsed,) = post.ctx, post.ids
    reason = reason.strip()
    if not reason or len(reason) > MAX_ROLLOUT_REASON:
        return _releases_page(ctx, status_code=422, rollout_error=(parsed, "reason"))
    actor = post.actor
    try:
        if action == "promote":
            rollout_backend.promote_release(
                ctx.services, parsed, reason=reason, actor=actor, now=ctx.now
            )
        elif action == "halt":
            rollout_backend.halt_release(
                ctx.services, parsed, reason=reason, actor=actor, now=ctx.now
            )
        elif action == "resume":
            rollout_backend.resume_release(
                ctx.services, parsed, reason=reason, actor=actor, now=ctx.now
            )
        else:
            rollout_backend.set_release_brake(
                ctx.services,
                parsed,
                engaged=action == "brake",
                reason=reason,
                actor=actor,
                now=ctx.now,
            )
    except backend.Refused:
        # The release's state does not allow it (promote a release that is not a canary, resume
        # one that is not halted, halt one already halted).
        return _releases_page(ctx, status_code=409, rollout_error=(parsed, action))
    return redirect(
        f"{PREFIX}/operator/releases?" + urlencode({"done": action}) + f"#release-{parsed}"
    )
