"""Enrollment tokens: the host's exchange (`POST /v1/agent/enroll` with `Authorization: Bearer
nwe_…`), the operators' tokens of any organisation (`/v1/admin/enrollment-tokens`) and a
customer's tokens of its own organisation (`/v1/enrollment-tokens`, a panel key).

The exchange takes no agent credential (the host has none yet) and is answered from the
database every time: it is not one of the hot answers kept in memory. A token is 256 random
bits, so it needs no rate limit (see `control_plane.enrollment.rules`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from control_plane.accounts.services import Principal, actor_of
from control_plane.api.answers import AUTHENTICATED, errors
from control_plane.api.deps import (
    EnrollmentBearer,
    OperatorCaller,
    PanelCaller,
    RequestNow,
    services_of,
)
from control_plane.api.no_body import NoBody
from control_plane.enrollment.rules import (
    DEFAULT_EXPIRES_IN,
    DEFAULT_USES,
    MAX_EXPIRES_IN,
    MAX_LABEL_LENGTH,
    MAX_PATTERN_LENGTH,
    MAX_USES,
    MIN_EXPIRES_IN,
    TokenTerms,
    install_command,
)
from control_plane.enrollment.services import (
    EnrollmentTokenList,
    EnrollmentTokenView,
)
from ground.contract import API_PREFIX, ENROLL_PATH, EnrolledAgent, EnrollRequest, ErrorAnswer
from ground.contract.plain_text import PLAIN_TEXT_PATTERN

__all__ = ["EnrollmentTokenShownOnce", "router"]

router = APIRouter()

# The exchange's refusals are the contract's codes, 401 included (never a credential's string).
_ENROLL_ERRORS = errors(401, 409, 422, 503, models={401: ErrorAnswer})


class TokenTermsBody(BaseModel):
    """What a new token allows; every bound is refused naming the field."""

    model_config = ConfigDict(extra="forbid")

    uses: int = Field(
        default=DEFAULT_USES, ge=1, le=MAX_USES, description="how many hosts may enroll with it"
    )
    expires_in_minutes: int = Field(
        default=int(DEFAULT_EXPIRES_IN.total_seconds()) // 60,
        ge=int(MIN_EXPIRES_IN.total_seconds()) // 60,
        le=int(MAX_EXPIRES_IN.total_seconds()) // 60,
        description="how long it may be used (default 24 hours, at most 30 days)",
    )
    name_pattern: str | None = Field(
        default=None,
        max_length=MAX_PATTERN_LENGTH,
        pattern=PLAIN_TEXT_PATTERN,
        description="a shell-style pattern the whole agent name must match (case-sensitive)",
        examples=["web-*.example.internal"],
    )
    label: str | None = Field(
        default=None,
        max_length=MAX_LABEL_LENGTH,
        pattern=PLAIN_TEXT_PATTERN,
        description="what it is for, shown in the list",
        examples=["web servers, December rollout"],
    )

    def terms(self) -> TokenTerms:
        return TokenTerms(
            uses=self.uses,
            expires_in=timedelta(minutes=self.expires_in_minutes),
            name_pattern=self.name_pattern,
            label=self.label,
        )


class OperatorTokenBody(TokenTermsBody):
    org_id: UUID = Field(description="the organisation its agents join")


@dataclass(frozen=True, kw_only=True)
class EnrollmentTokenShownOnce:
    """A new token, its secret and the line to run on the host, shown this once."""

    token: EnrollmentTokenView
    secret: str
    install_command: Annotated[
        str,
        Field(
            description="the line to run as root on the host; the file it names (`--trust-root"
            " root-N.json`, the newest published trust root, or `--trusted-key release.pub` while"
            " none is published) comes from the provider, out of band, never from the control"
            " plane, and must be on the host first",
            examples=[
                "nachtwacht agent install --url https://control.example --enrollment-token nwe_…"
                " --trust-root root-1.json"
            ],
        ),
    ]


def _issued(
    request: Request, org_id: UUID, body: TokenTermsBody, caller: Principal, now: datetime
) -> EnrollmentTokenShownOnce:
    """A new token of `org_id`, made by `caller`, with its secret and install line."""
    services = services_of(request)
    issued = services.enrollment.create(org_id, body.terms(), now=now, actor=actor_of(caller))
    # The control plane as this caller reached it: the address hosts reach it at, as a rule.
    url = str(request.base_url).rstrip("/")
    return EnrollmentTokenShownOnce(
        token=issued.token,
        secret=issued.secret,
        install_command=install_command(url, issued.secret, services.trust_roots.newest_version()),
    )


@router.post(
    ENROLL_PATH,
    status_code=201,
    response_model=EnrolledAgent,
    responses=_ENROLL_ERRORS,
    tags=["agent"],
)
def enroll(
    body: EnrollRequest,
    request: Request,
    now: RequestNow,
    token: EnrollmentBearer,
) -> EnrolledAgent:
    """A new agent of the token's organisation, named `name`, and its own credential (shown
    this once); the token has one use fewer. 401 `enrollment_token_refused` (unknown or
    revoked: the same answer), `enrollment_token_expired`, `enrollment_token_used_up`; 422
    `agent_name_not_allowed` (the token's name pattern); 409 `agent_exists`. A refusal changes
    nothing. A body that cannot be read is a 422 `invalid_request` only for a token that exists
    and is not revoked (else the 401 above)."""
    return services_of(request).enrollment.enroll(token, body.name, now=now)


# -- the operators' tokens ------------------------------------------------------------------------


@router.post(
    API_PREFIX + "/admin/enrollment-tokens",
    status_code=201,
    response_model=EnrollmentTokenShownOnce,
    responses=errors(*AUTHENTICATED, 404, 422),
    tags=["operator"],
)
def create_token(
    body: OperatorTokenBody, request: Request, caller: OperatorCaller, now: RequestNow
) -> EnrollmentTokenShownOnce:
    """A new enrollment token of any organisation; its secret and install line are shown once."""
    return _issued(request, body.org_id, body, caller, now)


@router.get(
    API_PREFIX + "/admin/enrollment-tokens",
    response_model=EnrollmentTokenList,
    responses=errors(*AUTHENTICATED, 422),
    tags=["operator"],
)
def list_tokens(
    request: Request,
    caller: OperatorCaller,
    now: RequestNow,
    org_id: Annotated[UUID | None, Query()] = None,
    active_only: Annotated[bool, Query()] = False,
) -> EnrollmentTokenList:
    """Tokens, newest first (at most 200), with their uses left, expiry and state; never a
    secret."""
    del caller
    return services_of(request).enrollment.list(org_id=org_id, now=now, active_only=active_only)


@router.post(
    API_PREFIX + "/admin/enrollment-tokens/{token_id}/revoke",
    response_model=EnrollmentTokenView,
    responses=errors(*AUTHENTICATED, 404, 422),
    tags=["operator"],
)
def revoke_token(
    token_id: UUID, request: Request, caller: OperatorCaller, now: RequestNow, _body: NoBody
) -> EnrollmentTokenView:
    """Refuse the token from now on (revoking it again changes nothing)."""
    return services_of(request).enrollment.revoke(
        token_id, org_id=None, now=now, actor=actor_of(caller)
    )


# -- a customer's own tokens ----------------------------------------------------------------------


@router.post(
    API_PREFIX + "/enrollment-tokens",
    status_code=201,
    response_model=EnrollmentTokenShownOnce,
    responses=errors(*AUTHENTICATED, 422),
    tags=["panel"],
)
def create_own_token(
    body: TokenTermsBody, request: Request, caller: PanelCaller, now: RequestNow
) -> EnrollmentTokenShownOnce:
    """A new enrollment token of the caller's organisation; secret and install line shown once."""
    assert caller.org_id is not None
    return _issued(request, caller.org_id, body, caller, now)


@router.get(
    API_PREFIX + "/enrollment-tokens",
    response_model=EnrollmentTokenList,
    responses=errors(*AUTHENTICATED, 422),
    tags=["panel"],
)
def list_own_tokens(
    request: Request,
    caller: PanelCaller,
    now: RequestNow,
    active_only: Annotated[bool, Query()] = False,
) -> EnrollmentTokenList:
    """The organisation's tokens, newest first (at most 200); never a secret."""
    assert caller.org_id is not None
    return services_of(request).enrollment.list(
        org_id=caller.org_id, now=now, active_only=active_only
    )


@router.post(
    API_PREFIX + "/enrollment-tokens/{token_id}/revoke",
    response_model=EnrollmentTokenView,
    responses=errors(*AUTHENTICATED, 404, 422),
    tags=["panel"],
)
def revoke_own_token(
    token_id: UUID, request: Request, caller: PanelCaller, now: RequestNow, _body: NoBody
) -> EnrollmentTokenView:
    """Refuse one of the organisation's tokens from now on (another's is not found)."""
    assert caller.org_id is not None
    return services_of(request).enrollment.revoke(
        token_id, org_id=caller.org_id, now=now, actor=actor_of(caller)
    )
