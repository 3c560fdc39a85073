"""What an agent asks for on behalf of the person on its host (`nachtwacht agent update-now`).

`POST MANUAL_UPDATES_PATH` files a manual update for the calling agent — the same run the panel's
"update now" files (`RunService.request_manual_update`), with the agent as its actor in the
trail — which the agent then learns of from its next config and claims like any manual run.
It takes no body (the agent is the one its credential names): a body is a 422, never ignored.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from control_plane.api.answers import AUTHENTICATED, errors
from control_plane.api.deps import AgentCaller, RequestNow, services_of
from control_plane.api.no_body import NoBody
from control_plane.runs.recorded_answer import recorded_run
from ground.contract import MANUAL_UPDATES_PATH, ManualUpdateView

__all__ = ["router"]

router = APIRouter(tags=["agent"])


@router.post(
    MANUAL_UPDATES_PATH,
    response_model=ManualUpdateView,
    status_code=201,
    responses={
        200: {"model": ManualUpdateView, "description": "an update is already pending: that run"},
        **errors(*AUTHENTICATED, 404, 422),
    },
)
def request_update_from_host(
    request: Request, response: Response, caller: AgentCaller, now: RequestNow, _body: NoBody
) -> ManualUpdateView:
    """Update this agent now, asked on its host. 201 new, 200 when one is already pending (its
    run). The agent picks it up from its config's `manual_update` within a minute. No body: one
    sent anyway is a 422 `invalid_request` naming it, and nothing is filed."""
    assert caller.org_id is not None and caller.agent_id is not None
    recorded = services_of(request).runs.request_manual_update(
        caller.org_id, caller.agent_id, caller.credential_id, now=now, actor_kind="agent"
    )
    run = recorded_run(recorded, response)
    return ManualUpdateView(run_id=run.run_id, requested_at=run.created_at)
