"""The panel's door to the rollout: release stages, halts and a release's own brake, the operators'
notices, the organisations' names, agents' releases, canaries, forced updates, pins and holds.

One of the four backend modules (see `backend`): it calls the domain services and turns their
refusals into the panel's `Missing` and `Refused`. Every function at an instant takes `now`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from control_plane.agents.fleet import OrgName
from control_plane.events.services import EventFilter, EventView
from control_plane.events.trail import Actor
from control_plane.panel.backend import (
    missing_as,
    missing_or_refused,
    refusals_as_panel_errors,
)
from control_plane.pins.holds import HoldSetter
from control_plane.pins.services import PinView
from control_plane.registry import Services
from control_plane.releases.withdrawal import ReleaseList
from control_plane.rollout.halts import HaltView, OperatorNotice
from control_plane.rollout.services import AgentRelease, RolloutOverview
from ground.contract import HoldView

__all__ = [
    "ReleaseState",
    "agent_release",
    "agent_releases",
    "end_hold",
    "end_holds",
    "force_update",
    "halt_release",
    "hold_agent",
    "hold_agents",
    "mark_canary",
    "mark_notice_read",
    "notices",
    "operator_orgs",
    "org_names",
    "pin",
    "pins",
    "promote_release",
    "release_states",
    "resume_release",
    "rollout_overview",
    "set_release_brake",
    "unpin",
    "unread_notices",
]


# The rollout: stages, halts, the brake of one release, pins, holds, the operators' notices


@dataclass(frozen=True, kw_only=True)
class ReleaseState:
    """What the releases screen shows beside a release: its stage, its halt (the one in force,
    with its evidence) and its own brake (with why and by whom, from the trail)."""

    stage: str | None
    halt: HaltView | None
    braked: bool
    brake_reason: str | None
    braked_by: str | None


def release_states(
    services: Services, listed: ReleaseList, *, now: datetime
) -> dict[UUID, ReleaseState]:
    """Per release of the list: its stage and halt (`/metrics`' states: each pair's current
    release and every halted or braked one) and its brake's reason from the trail."""
    states = {
        (s.channel, s.platform, s.version): s for s in services.metrics.snapshot(now).releases
    }
    # The trail is newest first: the first brake event of a release is its brake's last change.
    brakes: dict[str, EventView] = {}
    for change in services.events.trail(EventFilter(kind="brake.", limit=500)).events:
        release_id = change.data.get("release_id")
        if release_id and release_id not in brakes:
            brakes[release_id] = change
    result: dict[UUID, ReleaseState] = {}
    for track in listed.tracks:
        for entry in track.releases:
            state = states.get((track.channel, track.platform, entry.version))
            halt = None
            if state is not None and state.halted:
                halt = next(
                    (h for h in services.rollout.halts(entry.id).halts if h.resumed_at is None),
                    None,
                )
            braked = state is not None and state.braked
            last = brakes.get(str(entry.id))
            engaged = braked and last is not None and last.kind == "brake.engaged"
            result[entry.id] = ReleaseState(
                stage=None if state is None else state.stage,
                halt=halt,
                braked=braked,
                brake_reason=last.data.get("reason") if engaged and last else None,
                braked_by=last.actor.name if engaged and last else None,
            )
    return result


def promote_release(
    services: Services, release_id: UUID, *, reason: str, actor: Actor, now: datetime
) -> None:
    with refusals_as_panel_errors("release"):
        services.rollout.promote(release_id, reason=reason, actor=actor, now=now)


def halt_release(
    services: Services, release_id: UUID, *, reason: str, actor: Actor, now: datetime
) -> HaltView:
    with refusals_as_panel_errors("release"):
        return services.rollout.halt(release_id, reason=reason, actor=actor, now=now)


def resume_release(
    services: Services, release_id: UUID, *, reason: str, actor: Actor, now: datetime
) -> HaltView:
    with refusals_as_panel_errors("release"):
        return services.rollout.resume(release_id, reason=reason, actor=actor, now=now)


def set_release_brake(
    services: Services,
    release_id: UUID,
    *,
    engaged: bool,
    reason: str | None,
    actor: Actor,
    now: datetime,
) -> None:
    with refusals_as_panel_errors("release"):
        services.brake.set_release(release_id, engaged=engaged, reason=reason, actor=actor, now=now)


def notices(services: Services) -> tuple[OperatorNotice, ...]:
    return services.rollout.notices().notices


def mark_notice_read(services: Services, notice_id: UUID, *, actor: Actor, now: datetime) -> None:
    with missing_as("notice"):
        services.rollout.mark_notice_read(notice_id, actor=actor, now=now)


def unread_notices(services: Services) -> int:
    return sum(1 for notice in notices(services) if notice.read_at is None)


def rollout_overview(services: Services, *, now: datetime) -> RolloutOverview:
    return services.rollout.overview(now)


def operator_orgs(services: Services) -> tuple[OrgName, ...]:
    """Every organisation an operator can open, by name."""
    return services.fleet.org_names().orgs


def org_names(services: Services) -> dict[UUID, str]:
    """Each organisation's name by its id (the screens show names where they held ids)."""
    return {org.org_id: org.name for org in operator_orgs(services)}


def agent_release(
    services: Services, agent_id: UUID, *, org_id: UUID, now: datetime
) -> AgentRelease:
    with missing_as(str(agent_id)):
        return services.rollout.agent_release(agent_id, org_id=org_id, now=now)


def agent_releases(
    services: Services,
    org_id: UUID,
    *,
    now: datetime,
    agent_ids: Sequence[UUID] | None = None,
) -> dict[UUID, AgentRelease]:
    """The organisation's agents with their pair, offer, pin and hold, by agent id: those of
    `agent_ids` (a page of the list), or every agent."""
    with missing_as(str(org_id)):
        listed = services.rollout.org_agent_releases(org_id, now=now, agent_ids=agent_ids)
    return {agent.agent_id: agent for agent in listed.agents}


def mark_canary(
    services: Services, agent_id: UUID, *, canary: bool, actor: Actor, now: datetime
) -> None:
    with missing_as(str(agent_id)):
        services.rollout.mark_canary(agent_id, canary=canary, actor=actor, now=now)


def force_update(
    services: Services, agent_id: UUID, *, reason: str, actor: Actor, now: datetime
) -> UUID:
    with refusals_as_panel_errors("agent"):
        return services.rollout.force_update(agent_id, reason=reason, actor=actor, now=now).run_id


def pins(services: Services) -> tuple[PinView, ...]:
    return services.pins.pins().pins


def pin(
    services: Services,
    *,
    org_id: UUID | None = None,
    agent_id: UUID | None = None,
    version: str | None,
    reason: str | None,
    actor: Actor,
    now: datetime,
) -> PinView:
    with refusals_as_panel_errors("pin"):
        return services.pins.pin(
            org_id=org_id, agent_id=agent_id, version=version, reason=reason, actor=actor, now=now
        )


def unpin(
    services: Services,
    *,
    org_id: UUID | None = None,
    agent_id: UUID | None = None,
    actor: Actor,
    now: datetime,
) -> None:
    with missing_as("pin"):
        services.pins.unpin(org_id=org_id, agent_id=agent_id, actor=actor, now=now)


def hold_agent(
    services: Services,
    org_id: UUID,
    agent_id: UUID,
    *,
    until: datetime,
    reason: str,
    actor: Actor,
    now: datetime,
    set_by: HoldSetter = "customer",
) -> HoldView:
    """A hold of one of the organisation's agents, by its customer or an operator (another
    organisation's agent is missing)."""
    with missing_or_refused(str(agent_id)):
        return services.pins.hold(
            agent_id,
            org_id=org_id,
            until=until,
            reason=reason,
            set_by=set_by,
            actor=actor,
            now=now,
        )


def hold_agents(
    services: Services,
    org_id: UUID,
    agent_ids: Sequence[UUID],
    *,
    until: datetime,
    reason: str,
    actor: Actor,
    now: datetime,
) -> int:
    """A customer's hold of each agent listed, all or none (one change each on the trail)."""
    with missing_or_refused(str(org_id)):
        return services.pins.hold_many(
            agent_ids, org_id=org_id, until=until, reason=reason, actor=actor, now=now
        )


def end_holds(
    services: Services, org_id: UUID, agent_ids: Sequence[UUID], *, actor: Actor, now: datetime
) -> int:
    """End the hold of each agent listed: how many had one."""
    with missing_as(str(org_id)):
        return services.pins.release_holds(agent_ids, org_id=org_id, actor=actor, now=now)


def end_hold(
    services: Services, org_id: UUID, agent_id: UUID, *, actor: Actor, now: datetime
) -> None:
    with missing_as(str(agent_id)):
        services.pins.release_hold(agent_id, org_id=org_id, actor=actor, now=now)
