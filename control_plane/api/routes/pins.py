"""Pins (operators) and holds: the host's (`HOLD_PATH`, agent credential), the customer's
(`/v1/agents/{id}/hold`, panel credential) and the operators' (`/v1/admin/agents/{id}/hold`)."""

from __future__ import annotations

from uuid import UUID

from fastapi import APIRouter, Request, Response
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from control_plane.accounts.services import actor_of
from control_plane.api.answers import AUTHENTICATED, errors
from control_plane.api.deps import (
    AgentCaller,
    OperatorCaller,
    PanelCaller,
    RequestNow,
    services_of,
)
from control_plane.api.no_body import NoBody
from control_plane.pins.holds import MAX_HOLD_REASON_LENGTH, HoldAnswer
from control_plane.pins.services import MAX_PIN_REASON_LENGTH, PinList, PinView
from ground.contract import API_PREFIX, HOLD_PATH, HoldRequest
from ground.contract.plain_text import REASON_PATTERN
from ground.limits import MAX_VERSION_LENGTH

__all__ = ["router"]

router = APIRouter()

# -- the host ------------------------------------------------------------------------------------


@router.put(
    HOLD_PATH, response_model=HoldAnswer, tags=["agent"], responses=errors(*AUTHENTICATED, 404, 422)
)
def hold_self(
    body: HoldRequest, request: Request, caller: AgentCaller, now: RequestNow
) -> HoldAnswer:
    """The host holds itself (`nachtwacht agent hold --until`): its scheduled slots are skipped
    (recorded as missed, reason `held`) until `until`.
    `until`: in the future, at most 90 days ahead (else 422 naming it);
    a new hold replaces the current one, whoever set it; the same hold again (until, reason,
    who set it) changes nothing and answers `changed: false`."""
    assert caller.agent_id is not None
    return services_of(request).pins.hold(
        caller.agent_id,
        org_id=caller.org_id,
        until=body.until,
        reason=body.reason,
        set_by="agent",
        actor=actor_of(caller),
        now=now,
    )


@router.delete(
    HOLD_PATH,
    status_code=204,
    response_class=Response,
    tags=["agent"],
    responses=errors(*AUTHENTICATED, 404, 422),
)
def release_self(request: Request, caller: AgentCaller, now: RequestNow, _body: NoBody) -> Response:
    """The host ends its hold (whoever set it); 204 also when it was not held."""
    assert caller.agent_id is not None
    services_of(request).pins.release_hold(
        caller.agent_id, org_id=caller.org_id, actor=actor_of(caller), now=now
    )
    return Response(status_code=204)


# -- the customer and the operators ---------------------------------------------------------------


class HoldBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    until: AwareDatetime = Field(
        examples=["2026-12-07T08:00:00Z"], description="the hold ends then (at most 90 days)"
    )
    reason: str | None = Field(
        default=None,
        max_length=MAX_HOLD_REASON_LENGTH,
        json_schema_extra={"pattern": REASON_PATTERN},
    )


@router.put(
    API_PREFIX + "/agents/{agent_id}/hold",
    response_model=HoldAnswer,
    tags=["panel"],
    responses=errors(*AUTHENTICATED, 404, 422),
)
def hold_agent(
    agent_id: UUID, body: HoldBody, request: Request, caller: PanelCaller, now: RequestNow
) -> HoldAnswer:
    """The customer holds one of its agents until a date.
    `until`: in the future, at most 90 days ahead (else 422 naming it);
    a new hold replaces the current one, whoever set it; the same hold again (until, reason,
    who set it) changes nothing and answers `changed: false`."""
    assert caller.org_id is not None
    return services_of(request).pins.hold(
        agent_id,
        org_id=caller.org_id,
        until=body.until,
        reason=body.reason,
        set_by="customer",
        actor=actor_of(caller),
        now=now,
    )


@router.delete(
    API_PREFIX + "/agents/{agent_id}/hold",
    status_code=204,
    response_class=Response,
    tags=["panel"],
    responses=errors(*AUTHENTICATED, 404, 422),
)
def release_agent(
    agent_id: UUID, request: Request, caller: PanelCaller, now: RequestNow, _body: NoBody
) -> Response:
    """The customer ends its agent's hold (whoever set it); 204 also when it was not held."""
    assert caller.org_id is not None
    services_of(request).pins.release_hold(
        agent_id, org_id=caller.org_id, actor=actor_of(caller), now=now
    )
    return Response(status_code=204)


@router.put(
    API_PREFIX + "/admin/agents/{agent_id}/hold",
    response_model=HoldAnswer,
    tags=["operator"],
    responses=errors(*AUTHENTICATED, 404, 422),
)
def operator_hold_agent(
    agent_id: UUID, body: HoldBody, request: Request, caller: OperatorCaller, now: RequestNow
) -> HoldAnswer:
    """An operator holds an agent until a date.
    `until`: in the future, at most 90 days ahead (else 422 naming it);
    a new hold replaces the current one, whoever set it; the same hold again (until, reason,
    who set it) changes nothing and answers `changed: false`."""
    return services_of(request).pins.hold(
        agent_id,
        org_id=None,
        until=body.until,
        reason=body.reason,
        set_by="operator",
        actor=actor_of(caller),
        now=now,
    )


class PinBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_VERSION_LENGTH,
        examples=["1.5.0"],
        description="the version to offer (a published release, not withdrawn); absent or null:"
        " hold at whatever the agent runs",
    )
    reason: str | None = Field(
        default=None,
        max_length=MAX_PIN_REASON_LENGTH,
        json_schema_extra={"pattern": REASON_PATTERN},
    )


@router.get(
    API_PREFIX + "/admin/pins",
    response_model=PinList,
    tags=["operator"],
    responses=errors(*AUTHENTICATED),
)
def list_pins(request: Request, caller: OperatorCaller) -> PinList:
    """Every pin, oldest first."""
    del caller
    return services_of(request).pins.pins()


@router.put(
    API_PREFIX + "/admin/agents/{agent_id}/pin",
    response_model=PinView,
    tags=["operator"],
    responses=errors(*AUTHENTICATED, 404, 422),
)
def pin_agent(
    agent_id: UUID, body: PinBody, request: Request, caller: OperatorCaller, now: RequestNow
) -> PinView:
    """Pin one agent: it is offered this version (or kept at what it runs), whatever its pair's
    current release, and is up to date once it runs it. Wins over its organisation's pin."""
    return services_of(request).pins.pin(
        agent_id=agent_id, version=body.version, reason=body.reason, actor=actor_of(caller), now=now
    )


@router.delete(
    API_PREFIX + "/admin/agents/{agent_id}/pin",
    status_code=204,
    response_class=Response,
    tags=["operator"],
    responses=errors(*AUTHENTICATED, 404, 422),
)
def unpin_agent(
    agent_id: UUID, request: Request, caller: OperatorCaller, now: RequestNow, _body: NoBody
) -> Response:
    """Remove the agent's own pin (404 when it has none)."""
    services_of(request).pins.unpin(agent_id=agent_id, actor=actor_of(caller), now=now)
    return Response(status_code=204)


@router.put(
    API_PREFIX + "/admin/orgs/{org_id}/pin",
    response_model=PinView,
    tags=["operator"],
    responses=errors(*AUTHENTICATED, 404, 422),
)
def pin_org(
    org_id: UUID, body: PinBody, request: Request, caller: OperatorCaller, now: RequestNow
) -> PinView:
    """Pin every agent of an organisation (an agent's own pin wins)."""
    return services_of(request).pins.pin(
        org_id=org_id, version=body.version, reason=body.reason, actor=actor_of(caller), now=now
    )


@router.delete(
    API_PREFIX + "/admin/orgs/{org_id}/pin",
    status_code=204,
    response_class=Response,
    tags=["operator"],
    responses=errors(*AUTHENTICATED, 404, 422),
)
def unpin_org(
    org_id: UUID, request: Request, caller: OperatorCaller, now: RequestNow, _body: NoBody
) -> Response:
    """Remove the organisation's pin (404 when it has none)."""
    services_of(request).pins.unpin(org_id=org_id, actor=actor_of(caller), now=now)
    return Response(status_code=204)
