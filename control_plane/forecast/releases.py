"""How many agents get each release on a night, at each wave, within the
caps; and what publishing a release does in the day after.

For every pair's current release the agents that would take it that night are counted at its
current wave and at each later one (`control_plane.rollout.waves`: a wave reaches its agents and
every earlier wave's), the last being `everyone` (every agent of the pair not pinned elsewhere).
An agent counts when its schedule is on, it is not held, and it does not run the release yet;
it asks at its first slot of the night. Whether the agent is offered
the release is the rollout's own rule, kept per agent (`control_plane.rollout.kept_offers`) and
counted in SQL, with holds judged at the request's `now`.

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
from datetime import date, datetime, timedelta
from uuid import UUID

from control_plane.forecast.model import (
    ReleaseNight,
    StageName,
    StageNight,
    WaveNight,
    WaveOutlook,
    fair_shares,
)
from control_plane.forecast.schedule_slots import SlotOf, with_slots
from control_plane.rollout.kept_offers import refresh as refresh_kept_offers
from control_plane.rollout.waves import Wave, effective_wave, read_plan
from control_plane.settings.services import PlatformSettings
from control_plane.types import Connection
from shared_planner import parse_times, slots_on_day

__all__ = [
    "AgentNeed",
    "CurrentRelease",
    "publish_outlook",
    "read_release_needs",
    "release_nights",
]

# How far publishing looks ahead: every agent's next slot, once.
OUTLOOK = timedelta(hours=24)


@dataclass(frozen=True, kw_only=True)
class AgentNeed:
    """One agent's part of the night: where and when it asks, and which release it would take
    at each stage (None: it takes none)."""

    org_id: UUID
    slot_at: datetime
    # The first wave of its pair's current release that reaches it (None: it would not take
    # that release at any wave: it runs it, or it is pinned).
    first_wave: int | None
    at_everyone: UUID | None
    # The release it takes with every release at its current stage (its pair's current one, or
    # the previous one while the current is in its canary stage), if any.
    tonight: UUID | None
    # How many agents share all of the above: the night's sums count each once.
    agents: int = 1


@dataclass(frozen=True, kw_only=True)
class CurrentRelease:
    id: UUID
    channel: str
    platform: str
    version: str
    stage: StageName
    halted: bool
    # The wave it is in (the plan's last at `everyone`), and the plan.
    wave: int
    plan: tuple[Wave, ...]


def _current_releases(conn: Connection) -> list[CurrentRelease]:
    plan = read_plan(conn)
    rows = conn.execute(
        "SELECT rel.id, cur.channel, cur.platform, rel.agent_version AS version, rel.stage,"
        " rel.wave, EXISTS (SELECT 1 FROM release_halts h WHERE h.release_id = rel.id"
        "   AND h.resumed_at IS NULL) AS halted"
        " FROM current_releases cur JOIN releases rel ON rel.id = cur.release_id"
        " ORDER BY cur.channel, cur.platform"
    ).fetchall()
    return [
        CurrentRelease(
            **{**row, "wave": effective_wave(row["stage"], row["wave"], len(plan))}, plan=plan
        )
        for row in rows
    ]


def read_release_needs(
    conn: Connection, *, day: date, settings: PlatformSettings, now: datetime
) -> tuple[list[CurrentRelease], list[AgentNeed]]:
    """The pairs' current releases and every scheduled agent's need on local `day`."""

    def first_slot_of_day(times: tuple[str, ...]) -> datetime | None:
        slots = slots_on_day(parse_times(times), day, tz=settings.zone)
        return slots[0].at if slots else None

    releases = _current_releases(conn)
    return releases, _needs(conn, first_slot_of_day, now)


# Every scheduled live agent's need, from its kept offer (`control_plane.rollout.kept_offers`),
# agents alike counted together. An agent counts when its pair has a current release and it is
# not held at `now`. It does not take the current release at any wave (`first_wave`,
# `at_everyone` NULL) when it runs it already or is pinned (a pinned agent takes its pin at
# any wave, and still asks within the caps). What it takes tonight is its offer, whichever
# release that is (the previous one for a non-canary while the new one is in its canary
# stage), unless the offer is halted or braked or it runs it already.
_NEEDS = """
SELECT ag.update_schedule_times::text AS times, ag.org_id,
       CASE WHEN running.runs_current OR o.basis = 'pinned' THEN NULL ELSE o.wave END AS first_wave,
       CASE WHEN running.runs_current OR o.basis = 'pinned' THEN NULL ELSE cur.release_id END
           AS at_everyone,
       CASE WHEN rel.id IS NOT NULL AND halt.id IS NULL AND rel.braked_at IS NULL
                 AND rel.agent_version IS DISTINCT FROM ag.current_version THEN rel.id END
           AS tonight,
       count(*) AS agents
  FROM agent_offers o
  JOIN agents ag ON ag.id = o.agent_id AND ag.deleted_at IS NULL
       AND ag.update_schedule_enabled AND jsonb_array_length(ag.update_schedule_times) > 0
  JOIN current_releases cur ON cur.channel = o.channel AND cur.platform = o.platform
  JOIN releases current_release ON current_release.id = cur.release_id
  LEFT JOIN releases rel ON rel.id = o.release_id
  LEFT JOIN release_halts halt ON halt.release_id = rel.id AND halt.resumed_at IS NULL
  LEFT JOIN holds h ON h.agent_id = o.agent_id AND h.until > %(now)s
 CROSS JOIN LATERAL (
       SELECT coalesce(ag.current_version = current_release.agent_version, false)
           AS runs_current) AS running
 WHERE h.agent_id IS NULL
 GROUP BY 1, 2, 3, 4, 5
"""


def _needs(conn: Connection, slot_of: SlotOf, now: datetime) -> list[AgentNeed]:
    refresh_kept_offers(conn)
    return [
        AgentNeed(
            org_id=row["org_id"],
            slot_at=slot_at,
            first_wave=row["first_wave"],
            at_everyone=row["at_everyone"],
            tonight=row["tonight"],
            agents=row["agents"],
        )
        for row, slot_at in with_slots(conn.execute(_NEEDS, {"now": now}), slot_of)
    ]


# One slot instant's demand per organisation: release → agents (agents sharing an instant are
# summed, whichever schedule gave it).
SlotDemand = dict[UUID, dict[UUID, int]]


@dataclass(frozen=True, kw_only=True)
class _ReleaseDemand:
    """The night's needs seen from one release, per slot instant and organisation: what the
    agents it does not concern take (the same at every wave: summed once), and the agents of
    its pair that it may reach (`first_wave`, what they take tonight, how many), weighed anew
    at each wave."""

    fixed: dict[datetime, SlotDemand]
    moving: dict[datetime, dict[UUID, list[tuple[int | None, UUID | None, int]]]]


def _demand(needs: Sequence[AgentNeed], release: CurrentRelease) -> _ReleaseDemand:
    fixed: dict[datetime, SlotDemand] = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    moving: dict[datetime, dict[UUID, list[tuple[int | None, UUID | None, int]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for need in needs:
        if need.at_everyone == release.id:
            moving[need.slot_at][need.org_id].append((need.first_wave, need.tonight, need.agents))
        elif need.tonight is not None and need.tonight != release.id:
            # Not reached by this release at any wave: it keeps what it takes tonight.
            fixed[need.slot_at][need.org_id][need.tonight] += need.agents
        # Else it takes nothing at any wave of this release (offered it outside its waves, when
        # pinned to it, it is not counted in its night): no demand.
    return _ReleaseDemand(fixed=fixed, moving=moving)


def _served_at_slot(per_org: SlotDemand, release_id: UUID, settings: PlatformSettings) -> int:
    """How many of the agents wanting `release_id` at one slot the caps serve, beside every
    other agent's demand there."""
    shares = fair_shares(
        {org: sum(releases.values()) for org, releases in per_org.items()},
        org_cap=settings.org_cap,
        global_cap=settings.global_cap,
        window_minutes=settings.grant_rounds,
    )
    return sum(
        _split(releases, shares[org].can_update).get(release_id, 0)
        for org, releases in per_org.items()
    )


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


def _reaches(first_wave: int | None, release: CurrentRelease, wave: int) -> bool:
    """An agent of the release's pair (that does not run it and is not pinned) takes `release`
    when the release is in `wave`."""
    if wave == len(release.plan):
        return True
    return first_wave is not None and first_wave <= wave


def _wave_night(
    demand: _ReleaseDemand, release: CurrentRelease, wave: int, settings: PlatformSettings
) -> StageNight:
    # This release in `wave`; every other agent keeps what it takes tonight.
    agents = 0
    served = 0
    for slot_at in demand.fixed.keys() | demand.moving.keys():
        fixed = demand.fixed.get(slot_at, {})
        moving = demand.moving.get(slot_at, {})
        per_org: SlotDemand = {}
        for org in fixed.keys() | moving.keys():
            releases = defaultdict(int, fixed.get(org, {}))
            for first_wave, tonight, count in moving.get(org, ()):
                if _reaches(first_wave, release, wave):
                    releases[release.id] += count
                    agents += count
                elif tonight is not None and tonight != release.id:
                    releases[tonight] += count
            if releases:
                per_org[org] = releases
        if not release.halted and release.id in _wanted(per_org):
            served += _served_at_slot(per_org, release.id, settings)
    return StageNight(agents=agents, can_update=served, will_miss=agents - served)


def _wanted(per_org: SlotDemand) -> set[UUID]:
    return {release for releases in per_org.values() for release in releases}


def _release_night(
    release: CurrentRelease, needs: Sequence[AgentNeed], settings: PlatformSettings
) -> ReleaseNight:
    demand = _demand(needs, release)
    waves = tuple(
        WaveNight(
            **vars(_wave_night(demand, release, wave.position, settings)),
            position=wave.position,
            share_percent=wave.share_percent,
            canaries=wave.canaries,
        )
        for wave in release.plan
        if wave.position >= release.wave
    )
    last = waves[-1]
    return ReleaseNight(
        release_id=release.id,
        channel=release.channel,
        platform=release.platform,
        version=release.version,
        stage=release.stage,
        halted=release.halted,
        canary=(
            StageNight(
                agents=waves[0].agents, can_update=waves[0].can_update, will_miss=waves[0].will_miss
            )
            if release.stage == "canary"
            else None
        ),
        everyone=StageNight(
            agents=last.agents, can_update=last.can_update, will_miss=last.will_miss
        ),
        wave=release.wave,
        waves=waves,
    )


def release_nights(
    releases: Sequence[CurrentRelease], needs: Sequence[AgentNeed], settings: PlatformSettings
) -> tuple[ReleaseNight, ...]:
    """Each pair's current release on the night: its agents at its current wave and at each
    later one, within the caps."""
    return tuple(_release_night(release, needs, settings) for release in releases)


def publish_outlook(
    conn: Connection, release_id: UUID, *, settings: PlatformSettings, now: datetime
) -> WaveOutlook | None:
    """What the release just published (its pair's current one) does in the next 24 hours:
    the wave it is in, how many agents that wave reaches at their next slot and how many of
    them the caps serve, and when the first of them asks. None when it is not current."""
    releases = _current_releases(conn)
    release = next((r for r in releases if r.id == release_id), None)
    if release is None:
        return None
    until = now + OUTLOOK

    def next_slot(times: tuple[str, ...]) -> datetime | None:
        # A slot whose catch-up window is still open counts: its agents still ask.
        opened = now - timedelta(minutes=settings.catch_up_minutes)
        today = now.astimezone(settings.zone).date()
        parsed = parse_times(times)
        for day in (today - timedelta(days=1), today, today + timedelta(days=1)):
            for slot in slots_on_day(parsed, day, tz=settings.zone):
                if opened < slot.at <= until:
                    return slot.at
        return None

    needs = _needs(conn, next_slot, now)
    night = _wave_night(_demand(needs, release), release, release.wave, settings)
    wave = release.plan[release.wave - 1]
    reached = [
        need.slot_at
        for need in needs
        if need.at_everyone == release.id and _reaches(need.first_wave, release, release.wave)
    ]
    return WaveOutlook(
        stage=release.stage,
        wave=release.wave,
        waves=len(release.plan),
        share_percent=wave.share_percent,
        canaries=wave.canaries,
        agents=night.agents,
        can_update=night.can_update,
        will_miss=night.will_miss,
        first_slot_at=min(reached) if reached else None,
        first_slot_local_time=(
            min(reached).astimezone(settings.zone).isoformat() if reached else None
        ),
        until=until,
    )
