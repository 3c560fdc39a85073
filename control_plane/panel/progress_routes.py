"""Following a manual update: its progress page and the page's JSON twin (polled by
`static/progress.js`; without the script the page refreshes itself until the update has ended)."""

from __future__ import annotations

from dataclasses import asdict
from uuid import UUID

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from control_plane.panel import backend, customer_backend
from control_plane.panel.progress import progress_of
from control_plane.panel.readers import TurnedAway, customer_of, parse_id
from control_plane.panel.web import PREFIX, PanelContext, not_found, page, with_headers

__all__ = ["router"]

router = APIRouter(prefix=PREFIX, include_in_schema=False)

# Without script, the page asks again this often (seconds) while the update runs.
REFRESH_SECONDS = 5


def _found(
    ctx: PanelContext, org_id: UUID, agent_id: str, run_id: str
) -> customer_backend.ManualRun | None:
    agent, run = parse_id(agent_id), parse_id(run_id)
    if agent is None or run is None:
        return None
    try:
        return customer_backend.manual_run(ctx.services, org_id, agent, run, now=ctx.now)
    except backend.Missing:
        return None


@router.get("/agents/{agent_id}/updates/{run_id}.json")
def update_progress_json(request: Request, agent_id: str, run_id: str) -> Response:
    try:
        ctx, org_id = customer_of(request)
    except TurnedAway as away:
        # A script's poll gets a status, not a page: it stops and leaves the page as it is.
        if away.answer.status_code == 404:  # signed in, but not as a customer
            return with_headers(JSONResponse({"detail": "not found"}, status_code=404))
        return with_headers(JSONResponse({"detail": "signed out"}, status_code=401))
    found = _found(ctx, org_id, agent_id, run_id)
    if found is None:
        return with_headers(JSONResponse({"detail": "not found"}, status_code=404))
    zone = backend.platform(ctx.services).zone
    progress = progress_of(ctx.lang, found.run, zone)
    return with_headers(JSONResponse(asdict(progress)))


@router.get("/agents/{agent_id}/updates/{run_id}")
def update_progress(request: Request, agent_id: str, run_id: str) -> Response:
    ctx, org_id = customer_of(request)
    found = _found(ctx, org_id, agent_id, run_id)
    if found is None:
        return not_found(ctx)
    zone = backend.platform(ctx.services).zone
    progress = progress_of(ctx.lang, found.run, zone)
    return page(
        ctx,
        "progress.html",
        agent_id=agent_id,
        agent_name=found.agent_name,
        progress=progress,
        refresh_seconds=REFRESH_SECONDS,
        poll_url=f"{PREFIX}/agents/{agent_id}/updates/{run_id}.json",
    )
