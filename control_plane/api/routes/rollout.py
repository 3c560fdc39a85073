"""The rollout for operators (waves and stages, canaries, halts, the inbox, forced updates, the
forecast per wave) and each agent's pair and offered release for the panel's API."""

from __future__ import annotations

from uuid import UUID

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from control_plane.accounts.services import actor_of
from control_plane.api.answers import AUTHENTICATED, errors
from control_plane.api.deps import OperatorCaller, PanelCaller, RequestNow, services_of
from control_plane.api.no_body import NoBody
from control_plane.rollout.halts import MAX_HALT_REASON_LENGTH, HaltView, OperatorNotice
from control_plane.rollout.services import (
    AgentRelease,
    AgentReleaseList,
    CanaryMark,
    ForcedUpdate,
    HaltList,
    NoticeList,
    OrgCanaryMark,
    RolloutOverview,
)
from control_plane.rollout.stages import SETTING_BOUNDS, RolloutSettings, StageChange
from control_plane.rollout.waves import MAX_WAVES, WAVE_BOUNDS
from ground.contract import API_PREFIX
from ground.contract.plain_text import REASON_PATTERN

__all__ = ["router"]

router = APIRouter(prefix=API_PREFIX)


class ReasonBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(
        json_schema_extra={"pattern": REASON_PATTERN},
        min_length=1,
        max_length=MAX_HALT_REASON_LENGTH,
        examples=["the canaries' disk fills up"],
        description="required: kept with the action in the trail",
    )


def _bounded(name: str) -> object:
    low, high = SETTING_BOUNDS[name]
    return Field(default=None, ge=low, le=high)


def _wave_bound(name: str, default: object = None) -> object:
    low, high = WAVE_BOUNDS[name]
    return Field(default=default, ge=low, le=high)


class WaveBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    share_percent: StrictInt = _wave_bound("share_percent", ...)  # type: ignore[assignment]
    canaries: StrictBool = Field(
        default=False, description="the agents and organisations marked as canaries are in it"
    )
    soak_minutes: StrictInt | None = _wave_bound("soak_minutes")  # type: ignore[assignment]
    halt_failures: StrictInt | None = _wave_bound("halt_failures")  # type: ignore[assignment]
    halt_rate_percent: StrictInt | None = _wave_bound("halt_rate_percent")  # type: ignore[assignment]


class RolloutSettingsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    waves: list[WaveBody] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_WAVES,
        description="the plan, first wave first; the last is everyone (100 %). A wave's soak"
        " and threshold left out follow the settings below",
    )
    canary_share_percent: StrictInt | None = _bounded("canary_share_percent")  # type: ignore[assignment]
    soak_minutes: StrictInt | None = _bounded("soak_minutes")  # type: ignore[assignment]
    halt_failures: StrictInt | None = _bounded("halt_failures")  # type: ignore[assignment]
    halt_rate_percent: StrictInt | None = _bounded("halt_rate_percent")  # type: ignore[assignment]
    halt_window_minutes: StrictInt | None = _bounded("halt_window_minutes")  # type: ignore[assignment]


class CanaryBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    canary: StrictBool = Field(description="true: the agent is a canary of every release")


class OrgCanaryBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    canary: StrictBool = Field(
        description="true: every agent of the organisation is a canary of every release"
    )


class PromoteBody(ReasonBody):
    wave: StrictInt | None = Field(
        default=None,
        ge=2,
        le=MAX_WAVES,
        description="the wave to move the release to; default: the last (everyone)",
    )


@router.get(
    "/agents/{agent_id}/release",
    response_model=AgentRelease,
    tags=["panel"],
    responses=errors(*AUTHENTICATED, 404, 422),
)
def agent_release(
    agent_id: UUID, request: Request, caller: PanelCaller, now: RequestNow
) -> AgentRelease:
    """The agent's (channel, platform), the release it is offered and why (`pinned`, `current`,
    `canary`, `previous`), what it runs, whether that is up to date, and its hold."""
    assert caller.org_id is not None
    return services_of(request).rollout.agent_release(agent_id, org_id=caller.org_id, now=now)


@router.get(
    "/agent-releases",
    response_model=AgentReleaseList,
    tags=["panel"],
    responses=errors(*AUTHENTICATED),
)
def org_agent_releases(request: Request, caller: PanelCaller, now: RequestNow) -> AgentReleaseList:
    """Every agent of the organisation with its pair, offered release and why, what it runs,
    whether that is up to date, its pin and its hold — by name."""
    assert caller.org_id is not None
    return services_of(request).rollout.org_agent_releases(caller.org_id, now=now)


@router.get(
    "/admin/orgs/{org_id}/agent-releases",
    response_model=AgentReleaseList,
    tags=["operator"],
    responses=errors(*AUTHENTICATED, 404, 422),
)
def operator_org_agent_releases(
    org_id: UUID, request: Request, caller: OperatorCaller, now: RequestNow
) -> AgentReleaseList:
    """An organisation's agents with their pairs and offers."""
    del caller
    return services_of(request).rollout.org_agent_releases(org_id, now=now)


@router.get(
    "/admin/agents/{agent_id}/release",
    response_model=AgentRelease,
    tags=["operator"],
    responses=errors(*AUTHENTICATED, 404, 422),
)
def operator_agent_release(
    agent_id: UUID, request: Request, caller: OperatorCaller, now: RequestNow
) -> AgentRelease:
    """Any agent's pair, offered release, pin, canary mark and hold."""
    del caller
    return services_of(request).rollout.agent_release(agent_id, org_id=None, now=now)


@router.put(
    "/admin/agents/{agent_id}/canary",
    response_model=CanaryMark,
    tags=["operator"],
    responses=errors(*AUTHENTICATED, 404, 422),
)
def mark_canary(
    agent_id: UUID, body: CanaryBody, request: Request, caller: OperatorCaller, now: RequestNow
) -> CanaryMark:
    """Mark (or unmark) an agent as a canary: it gets every release in its canary stage."""
    return services_of(request).rollout.mark_canary(
        agent_id, canary=body.canary, actor=actor_of(caller), now=now
    )


@router.put(
    "/admin/orgs/{org_id}/canary",
    response_model=OrgCanaryMark,
    tags=["operator"],
    responses=errors(*AUTHENTICATED, 404, 422),
)
def mark_canary_org(
    org_id: UUID, body: OrgCanaryBody, request: Request, caller: OperatorCaller, now: RequestNow
) -> OrgCanaryMark:
    """Mark (or unmark) an organisation as a canary: its agents are in every wave that takes
    the canaries."""
    return services_of(request).rollout.mark_canary_org(
        org_id, canary=body.canary, actor=actor_of(caller), now=now
    )


@router.post(
    "/admin/agents/{agent_id}/forced-update",
    response_model=ForcedUpdate,
    status_code=201,
    tags=["operator"],
    responses=errors(*AUTHENTICATED, 404, 422),
)
def force_update(
    agent_id: UUID, body: ReasonBody, request: Request, caller: OperatorCaller, now: RequestNow
) -> ForcedUpdate:
    """A manual update that goes through the platform's brake, a halt or a release's brake
    (recorded as forced, with the reason); the agent learns of it from its config."""
    return services_of(request).rollout.force_update(
        agent_id, reason=body.reason, actor=actor_of(caller), now=now
    )


@router.get(
    "/admin/rollout/settings",
    response_model=RolloutSettings,
    tags=["operator"],
    responses=errors(*AUTHENTICATED),
)
def get_settings(request: Request, caller: OperatorCaller) -> RolloutSettings:
    """The waves, the first wave's share, the soak time and the halt threshold (count, rate,
    window) of every wave that sets none of its own."""
    del caller
    return services_of(request).rollout.settings()


@router.patch(
    "/admin/rollout/settings",
    response_model=RolloutSettings,
    tags=["operator"],
    responses=errors(*AUTHENTICATED, 422),
)
def patch_settings(
    body: RolloutSettingsBody, request: Request, caller: OperatorCaller, now: RequestNow
) -> RolloutSettings:
    """Change the named settings; each is bounded (a 422 names the one out of bounds)."""
    changes = body.model_dump(exclude_none=True)
    if body.waves is not None:
        changes["waves"] = [wave.model_dump() for wave in body.waves]
    return services_of(request).rollout.update_settings(changes, actor=actor_of(caller), now=now)


@router.get(
    "/admin/rollout",
    response_model=RolloutOverview,
    tags=["operator"],
    responses=errors(*AUTHENTICATED),
)
def overview(request: Request, caller: OperatorCaller, now: RequestNow) -> RolloutOverview:
    """Per pair's current release: its stage, and how many agents get it tonight at this stage,
    wait for `everyone`, are up to date (pinned agents at their pin included), pinned or held."""
    del caller
    return services_of(request).rollout.overview(now)


@router.post(
    "/admin/releases/{release_id}/promote",
    response_model=StageChange,
    tags=["operator"],
    responses=errors(*AUTHENTICATED, 404, 409, 422),
)
def promote(
    release_id: UUID, body: PromoteBody, request: Request, caller: OperatorCaller, now: RequestNow
) -> StageChange:
    """Promote a canary release now (without waiting for the soak): to the named wave, else to
    `everyone`; the reason is required and kept in the `release.promoted` event."""
    return services_of(request).rollout.promote(
        release_id, reason=body.reason, actor=actor_of(caller), now=now, to_wave=body.wave
    )


@router.post(
    "/admin/releases/{release_id}/halt",
    response_model=HaltView,
    tags=["operator"],
    responses=errors(*AUTHENTICATED, 404, 409, 422),
)
def halt(
    release_id: UUID, body: ReasonBody, request: Request, caller: OperatorCaller, now: RequestNow
) -> HaltView:
    """Halt a release by hand: claims of it refused (`release_halted`), outstanding tokens
    revoked, until a person resumes it."""
    return services_of(request).rollout.halt(
        release_id, reason=body.reason, actor=actor_of(caller), now=now
    )


@router.post(
    "/admin/releases/{release_id}/resume",
    response_model=HaltView,
    tags=["operator"],
    responses=errors(*AUTHENTICATED, 404, 409, 422),
)
def resume(
    release_id: UUID, body: ReasonBody, request: Request, caller: OperatorCaller, now: RequestNow
) -> HaltView:
    """End a release's halt (automatic or by hand); the reason is required and kept."""
    return services_of(request).rollout.resume(
        release_id, reason=body.reason, actor=actor_of(caller), now=now
    )


@router.get(
    "/admin/releases/{release_id}/halts",
    response_model=HaltList,
    tags=["operator"],
    responses=errors(*AUTHENTICATED, 404, 422),
)
def halts(release_id: UUID, request: Request, caller: OperatorCaller) -> HaltList:
    """The release's halts, newest first, each with the runs that tripped it: their ids
    (`runs`) and, per run, its agent and organisation (id and name), from and to which version,
    its outcome (`failed`, `rolled_back`) and reason (`evidence`)."""
    del caller
    return services_of(request).rollout.halts(release_id)


@router.get(
    "/admin/notices", response_model=NoticeList, tags=["operator"], responses=errors(*AUTHENTICATED)
)
def notices(request: Request, caller: OperatorCaller) -> NoticeList:
    """The operators' inbox, newest first: one notice per automatic halt, with its evidence
    (`runs`; `agents`: the first ten tripping runs by agent and organisation, with versions,
    outcome and reason; `more_agents`: how many more)."""
    del caller
    return services_of(request).rollout.notices()


@router.post(
    "/admin/notices/{notice_id}/read",
    response_model=OperatorNotice,
    tags=["operator"],
    responses=errors(*AUTHENTICATED, 404, 422),
)
def mark_notice_read(
    notice_id: UUID, request: Request, caller: OperatorCaller, now: RequestNow, _body: NoBody
) -> OperatorNotice:
    """Mark one notice read (the inbox's "N new" goes down); recorded as `notice.read` with its
    actor. A notice already read keeps the instant it was first read."""
    return services_of(request).rollout.mark_notice_read(notice_id, actor=actor_of(caller), now=now)
