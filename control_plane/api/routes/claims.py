"""`POST /v1/agent/claims`: the throttle token for a slot or a manual update.

Every refusal is a `ClaimRefused` carrying the contract's `RefusalCode`, whose `status` the
exception handler answers with; the claims service records it, so this route only maps. A slot's
claim the hot-answer middleware (`answers_cache.hot_answers`) could read gets here only once
that middleware admitted it among the grants in flight in this worker (one it refuses from
memory is answered there); one it could not read comes straight here.
"""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Request, Response

from control_plane.agent_scope import unknown_agent
from control_plane.api.agent_contract import agent_contract_of
from control_plane.api.answers import AUTHENTICATED, errors
from control_plane.api.deps import (
    AgentCredential,
    PresentedAgentKey,
    RequestNow,
    in_database_thread,
    services_of,
)
from control_plane.claims.services import Claim
from control_plane.registry import Services
from ground.contract import (
    CLAIMS_PATH,
    CONTRACT_VERSION_HEADER,
    ClaimGrant,
    ClaimRequest,
    RefusalCode,
)

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
async def claim(
    body: ClaimRequest,
    request: Request,
    response: Response,
    credential: AgentCredential,
    now: RequestNow,
) -> ClaimGrant:
    """The throttle token for a slot (or a manual update): 201 new, 200 the same claim again.
    Refusals carry a `code` (`RefusalCode`): 422 `not_a_slot`; 409 `window_closed`,
    `slot_consumed`, `no_release`, `held`, `release_rolled_back`, `release_halted` (the offered
    release is halted or under its brake: a slot is skipped, the next one asks again),
    `run_finished`; 503 `brake`; 429 `org_cap`/`global_cap` with `retry_after_seconds`;
    404 `run_not_found`. A manual update is offered what a scheduled claim would be, refused
    by the same stops and counted in the same caps unless an operator forced it (an agent of a
    contract before 4 is granted it outside the caps: it cannot wait for a full round)."""
    services = services_of(request)
    contract = agent_contract_of(request.headers.get(CONTRACT_VERSION_HEADER))
    granted = await in_database_thread(
        request, lambda: _claim(services, credential, body, now, contract)
    )
    if not granted.created:
        response.status_code = 200
    return granted.grant


def _claim(
    services: Services,
    credential: PresentedAgentKey,
    body: ClaimRequest,
    now: datetime,
    contract: int,
) -> Claim:
    # The scheduled claim (the 03:00 herd's refusal) checks the credential in its own statement.
    if body.slot_key is not None:
        # Asked again: the memory may have learnt the round full while this claim queued for a
        # database thread.
        services.claims.refuse_from_memory(
            credential.secret_sha256, body.slot_key, body.from_version, now, track=body.track
        )
        found = services.claims.claim_slot_as(
            credential.secret_sha256,
            body.slot_key,
            body.from_version,
            now,
            track=body.track,
            product=body.product,
            updater_version=body.updater_version,
        )
        if found is not None:
            return found
    caller = credential.principal(services)  # the 401 or 403, when that is why nothing was found
    assert caller.agent_id is not None
    if body.slot_key is not None:
        raise unknown_agent(caller.agent_id)
    return services.claims.claim(caller.agent_id, body, now, agent_contract=contract)
