"""The operators' emergency brake and token revocation."""

from __future__ import annotations

from uuid import UUID

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from control_plane.accounts.services import actor_of
from control_plane.api.answers import AUTHENTICATED, errors
from control_plane.api.deps import OperatorCaller, RequestNow, services_of
from control_plane.api.no_body import NoBody
from control_plane.brake.services import BrakeChange, BrakeState, ReleaseBrake, RevokedToken
from ground.contract import API_PREFIX
from ground.contract.plain_text import REASON_PATTERN

__all__ = ["router"]

router = APIRouter(prefix=API_PREFIX + "/admin", tags=["operator"])


class BrakeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    engaged: StrictBool
    reason: str | None = Field(
        json_schema_extra={"pattern": REASON_PATTERN},
        default=None,
        max_length=500,
        examples=["bad build 1.5.0"],
        description="required to engage: every agent is shown why updates stopped",
    )
    revoke_outstanding: StrictBool = Field(
        default=True, description="also revoke tokens granted but not yet used"
    )


@router.get("/brake", response_model=BrakeState, responses=errors(*AUTHENTICATED))
def get_brake(request: Request, caller: OperatorCaller) -> BrakeState:
    """Whether the emergency brake is engaged, why, and since when."""
    del caller
    return services_of(request).brake.get()


@router.put("/brake", response_model=BrakeChange, responses=errors(*AUTHENTICATED, 422))
def put_brake(
    body: BrakeBody, request: Request, caller: OperatorCaller, now: RequestNow
) -> BrakeChange:
    """Engage the brake (claims refused, outstanding tokens revoked) or release it. No customer
    setting changes."""
    return services_of(request).brake.set(
        engaged=body.engaged,
        reason=body.reason,
        revoke_outstanding=body.revoke_outstanding,
        actor=actor_of(caller),
        now=now,
    )


class ReleaseBrakeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    engaged: StrictBool
    reason: str | None = Field(
        json_schema_extra={"pattern": REASON_PATTERN},
        default=None,
        max_length=500,
        examples=["1.6.0 fills the disk"],
        description="required to engage: why this release stops",
    )


@router.put(
    "/releases/{release_id}/brake",
    response_model=ReleaseBrake,
    responses=errors(*AUTHENTICATED, 404, 422),
)
def put_release_brake(
    release_id: UUID,
    body: ReleaseBrakeBody,
    request: Request,
    caller: OperatorCaller,
    now: RequestNow,
) -> ReleaseBrake:
    """The brake scoped to one release: its claims are refused (`release_halted`), its
    outstanding tokens revoked, and manual updates to it refused unless an operator forces
    them. Other releases go on."""
    return services_of(request).brake.set_release(
        release_id, engaged=body.engaged, reason=body.reason, actor=actor_of(caller), now=now
    )


@router.post(
    "/tokens/{token_id}/revoke",
    response_model=RevokedToken,
    responses=errors(*AUTHENTICATED, 404, 422),
)
def revoke_token(
    token_id: UUID, request: Request, caller: OperatorCaller, now: RequestNow, _body: NoBody
) -> RevokedToken:
    """Revoke one throttle token: its run's download is refused from now on."""
    return services_of(request).brake.revoke_token(token_id, now=now, actor=actor_of(caller))
