"""The operators' credentials API: list, issue, revoke and rotate the three audiences'
credentials; delete an agent (its history stays) and read its runs."""

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from control_plane.accounts.credentials import Audience
from control_plane.accounts.services import (
    MAX_NAME_LENGTH,
    CredentialList,
    CredentialView,
    DeletedAgent,
    IssuedCredential,
    actor_of,
)
from control_plane.api.answers import AUTHENTICATED, errors
from control_plane.api.deps import OperatorCaller, RequestNow, services_of
from control_plane.api.no_body import NoBody
from control_plane.runs.services import RunList
from ground.contract import API_PREFIX

__all__ = ["router"]

router = APIRouter(prefix=API_PREFIX + "/admin", tags=["operator"])


class CredentialBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    audience: Literal["panel", "operator"] = Field(
        description="agent credentials come from enrolment (and rotation)"
    )
    name: str = Field(
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        description="who holds it: a person or a system",
        examples=["Ana (support desk)"],
    )
    org_id: UUID | None = Field(default=None, description="required for a panel credential")


@router.get("/credentials", response_model=CredentialList, responses=errors(*AUTHENTICATED, 422))
def list_credentials(
    request: Request,
    caller: OperatorCaller,
    audience: Annotated[Audience | None, Query()] = None,
    org_id: Annotated[UUID | None, Query()] = None,
    agent_id: Annotated[UUID | None, Query()] = None,
    include_revoked: Annotated[bool, Query()] = False,
) -> CredentialList:
    """Every credential with its holder's name and state; never a secret."""
    del caller
    return services_of(request).accounts.list_credentials(
        audience=audience, org_id=org_id, agent_id=agent_id, include_revoked=include_revoked
    )


@router.post(
    "/credentials",
    status_code=201,
    response_model=IssuedCredential,
    responses=errors(*AUTHENTICATED, 404, 422),
)
def issue_credential(
    body: CredentialBody, request: Request, caller: OperatorCaller, now: RequestNow
) -> IssuedCredential:
    """A new panel or operator credential for a named holder; the secret is shown this once."""
    return services_of(request).accounts.issue(
        Audience(body.audience), name=body.name, org_id=body.org_id, now=now, actor=actor_of(caller)
    )


@router.post(
    "/credentials/{credential_id}/revoke",
    response_model=CredentialView,
    responses=errors(*AUTHENTICATED, 404, 422),
)
def revoke_credential(
    credential_id: UUID, request: Request, caller: OperatorCaller, now: RequestNow, _body: NoBody
) -> CredentialView:
    """Refuse the credential from the next request on (revoking it again changes nothing)."""
    return services_of(request).accounts.revoke(credential_id, now=now, actor=actor_of(caller))


@router.post(
    "/credentials/{credential_id}/rotate",
    status_code=201,
    response_model=IssuedCredential,
    responses=errors(*AUTHENTICATED, 404, 409, 422),
)
def rotate_credential(
    credential_id: UUID, request: Request, caller: OperatorCaller, now: RequestNow, _body: NoBody
) -> IssuedCredential:
    """A new secret for the same holder and scope (shown once); the old one is revoked at once."""
    return services_of(request).accounts.rotate(credential_id, now=now, actor=actor_of(caller))


@router.delete(
    "/agents/{agent_id}",
    response_model=DeletedAgent,
    responses=errors(*AUTHENTICATED, 404, 422),
)
def delete_agent(
    agent_id: UUID, request: Request, caller: OperatorCaller, now: RequestNow, _body: NoBody
) -> DeletedAgent:
    """Delete an agent: its credentials are revoked and it leaves the panel; its runs and events
    stay (`GET /v1/admin/agents/{id}/runs`, `GET /v1/admin/events?agent_id=…`)."""
    return services_of(request).accounts.delete_agent(agent_id, now=now, actor=actor_of(caller))


@router.get(
    "/agents/{agent_id}/runs",
    response_model=RunList,
    responses=errors(*AUTHENTICATED, 404, 422),
)
def agent_runs(agent_id: UUID, request: Request, caller: OperatorCaller) -> RunList:
    """Any agent's runs, newest first — a deleted agent's history included."""
    del caller
    return services_of(request).runs.any_agent_runs(agent_id)
