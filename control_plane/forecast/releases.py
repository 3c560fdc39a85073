"""How many agents get each release on a night, at each stage, within the
caps.

For every pair's current release the agents that would take it that night are counted twice:
at its `canary` stage (the agents offered it as canaries) and at `everyone` (every agent of the
pair not pinned elsewhere). An agent counts when its schedule is on, it is not held, and it does
not run the release yet; it asks at its first slot of the night. Whether the agent is offered
the release is the rollout's own rule (`control_plane.rollout.services.agent_release`), read at
the request's `now`.

The caps are shared by every release asking at one slot: per slot, each organisation's demand is
its agents needing any release (every other release at its current stage, and the previous
release a non-canary takes while the new one is a canary), its part of what the
caps serve is `fair_shares`, and that part is split among the releases in proportion to their
agents (rounded down; the remainder goes to the release with the most agents in the
organisation). The split is an estimate — the caps serve whoever asks first — but the total per
organisation is the forecast's own figure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from uuid import UUID

from control_plane.forecast.model import ReleaseNight, StageName, StageNight, fair_shares
from control_plane.rollout.services import agent_release
from control_plane.settings.services import PlatformSettings
from control_plane.types import Connection
from shared_planner import parse_times, slots_on_day

__all__ = [
    "AgentNeed",
    "CurrentRelease",
    "read_release_needs",
    "release_nights",
]


@dataclass(frozen=True, kw_only=True)
class AgentNeed:
    """One agent's part of the night: where and when it asks, and which release it would take
    at each stage (None: it takes none)."""

    org_id: UUID
    slot_at: datetime
    at_canary: UUID | None
    at_everyone: UUID | None
    # The release it takes with every release at its current stage (its pair's current one, or
    # the previous one while the current is in its canary stage), if any.
    tonight: UUID | None


@dataclass(frozen=True, kw_only=True)
class CurrentRelease:
    id: UUID
    channel: str
    platform: str
    version: str
    stage: StageName
    halted: bool


def _current_releases(conn: Connection) -> list[CurrentRelease]:
    rows = conn.execute(
        "SELECT rel.id, cur.channel, cur.platform, rel.agent_version AS version, rel.stage,"
        " EXISTS (SELECT 1 FROM release_halts h WHERE h.release_id = rel.id"
        "   AND h.resumed_at IS NULL) AS halted"
        " FROM current_releases cur JOIN releases rel ON rel.id = cur.release_id"
        " ORDER BY cur.channel, cur.platform"
    ).fetchall()
    return [CurrentRelease(**row) for row in rows]


def read_release_needs(
    conn: Connection, *, day: date, settings: PlatformSettings, now: datetime
) -> tuple[list[CurrentRelease], list[AgentNeed]]:
    """The pairs' current releases and every scheduled agent's need on local `day`."""
    releases = _current_releases(conn)
    by_pair = {(r.channel, r.platform): r for r in releases}
    agents = conn.execute(
        "SELECT id, org_id, update_schedule_times AS times FROM agents"
        " WHERE update_schedule_enabled AND jsonb_array_length(update_schedule_times) > 0"
        " AND deleted_at IS NULL ORDER BY id"
    ).fetchall()
    needs = []
    for agent in agents:
        slots = slots_on_day(parse_times(tuple(agent["times"])), day, tz=settings.zone)
        if not slots:
            continue
        view = agent_release(conn, agent["id"], agent["org_id"], now)
        release = by_pair.get((view.track.channel, view.track.platform))
        if release is None or view.hold is not None:
            continue
        runs_it = view.running_version == release.version
        offered = view.offered
        # What it takes tonight, whichever release that is (the previous one for a non-canary
        # while the new one is in its canary stage): it asks within the same caps.
        takes_tonight = (
            offered is not None
            and not (offered.halted or offered.braked)
            and offered.version != view.running_version
        )
        canary = view.canary or view.basis == "canary"
        needs.append(
            AgentNeed(
                org_id=agent["org_id"],
                slot_at=slots[0].at,
                # A pinned agent takes its pin at any stage (and still asks within the caps).
                at_canary=None if runs_it or view.pinned or not canary else release.id,
                at_everyone=None if runs_it or view.pinned else release.id,
                tonight=offered.release_id if offered is not None and takes_tonight else None,
            )
        )
    return releases, needs


def _served(
    needs: Sequence[AgentNeed],
    wanted: Mapping[int, UUID | None],
    release_id: UUID,
    settings: PlatformSettings,
) -> int:
    """How many of the agents wanting `release_id` (`wanted[i]` is agent i's release) the caps
    serve, slot by slot, beside every other agent's demand."""
    per_slot: dict[datetime, dict[UUID, dict[UUID, int]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(int))
    )
    for index, need in enumerate(needs):
        chosen = wanted[index]
        if chosen is not None:
            per_slot[need.slot_at][need.org_id][chosen] += 1
    served = 0
    for per_org in per_slot.values():
        shares = fair_shares(
            {org: sum(releases.values()) for org, releases in per_org.items()},
            org_cap=settings.org_cap,
            global_cap=settings.global_cap,
            window_minutes=settings.catch_up_minutes,
        )
        for org, releases in per_org.items():
            served += _split(releases, shares[org].can_update).get(release_id, 0)
    return served


def _split(agents: Mapping[UUID, int], served: int) -> dict[UUID, int]:
    """`served` shared among the releases in proportion to their agents, rounded down; the
    remainder to the release with the most agents (the lowest id among equals)."""
    total = sum(agents.values())
    if total == 0:
        return {}
    parts = {release: served * n // total for release, n in agents.items()}
    largest = min(agents, key=lambda release: (-agents[release], str(release)))
    parts[largest] += served - sum(parts.values())
    return parts


def _stage_night(
    needs: Sequence[AgentNeed],
    release: CurrentRelease,
    stage: StageName,
    settings: PlatformSettings,
) -> StageNight:
    def at_stage(need: AgentNeed) -> UUID | None:
        return need.at_canary if stage == "canary" else need.at_everyone

    # This release at `stage`; every other agent keeps what it takes tonight.
    wanted: dict[int, UUID | None] = {}
    agents = 0
    for index, need in enumerate(needs):
        own = at_stage(need)
        if own == release.id:
            agents += 1
            wanted[index] = own
        elif need.tonight == release.id:
            wanted[index] = None  # at this stage it would not take this release
        else:
            wanted[index] = need.tonight
    can_update = 0 if release.halted else _served(needs, wanted, release.id, settings)
    return StageNight(agents=agents, can_update=can_update, will_miss=agents - can_update)


def release_nights(
    releases: Sequence[CurrentRelease], needs: Sequence[AgentNeed], settings: PlatformSettings
) -> tuple[ReleaseNight, ...]:
    """Each pair's current release on the night: its agents at each stage within the caps."""
    return tuple(
        ReleaseNight(
            release_id=release.id,
            channel=release.channel,
            platform=release.platform,
            version=release.version,
            stage=release.stage,
            halted=release.halted,
            canary=(
                _stage_night(needs, release, "canary", settings)
                if release.stage == "canary"
                else None
            ),
            everyone=_stage_night(needs, release, "everyone", settings),
        )
        for release in releases
    )
