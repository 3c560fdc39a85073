"""`POST /v1/agent/claims`: the throttle token for a slot or a manual update.

Every refusal is a `ClaimRefused` carrying the contract's `RefusalCode`, whose `status` the
exception handler answers with; the claims service records it, so this route only maps.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from control_plane.api.answers import AUTHENTICATED, errors
from control_plane.api.deps import AgentCaller, RequestNow, services_of
from ground.contract import CLAIMS_PATH, ClaimGrant, ClaimRequest, RefusalCode

__all__ = ["router"]

router = APIRouter(tags=["agent"])

_REFUSAL_STATUSES = sorted({code.status for code in RefusalCode})


@router.post(
    CLAIMS_PATH,
    response_model=ClaimGrant,
    status_code=201,
    responses={
        200: {"model": ClaimGrant, "description": "the same claim asked again: the same answer"},
        **errors(*AUTHENTICATED, *_REFUSAL_STATUSES),
    },
)
def claim(
    body: ClaimRequest, request: Request, response: Response, caller: AgentCaller, now: RequestNow
) -> ClaimGrant:
    """The throttle token for a slot (or a manual update): 201 new, 200 the same claim again.
    Refusals carry a `code` (`RefusalCode`): 422 `not_a_slot`; 409 `window_closed`,
    `slot_consumed`, `no_release`, `run_finished`; 503 `brake`; 429 `org_cap`/`global_cap` with
    `retry_after_seconds`; 404 `run_not_found`."""
    assert caller.agent_id is not None
    granted = services_of(request).claims.claim(caller.agent_id, body, now)
    if not granted.created:
        response.status_code = 200
    return granted.grant
