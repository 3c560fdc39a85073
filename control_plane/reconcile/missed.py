"""Silence made visible: a run row with status `missed` and its reason for every slot whose window
closed without one.

The slots come from `shared_planner.slots_on_day` over the platform's zone and each enabled
agent's current schedule, each slot whose window closes after the agent was enrolled (the
claim's rule, `claims.slots.agents_slot`: one under way at enrollment is the agent's). A slot is
not missed when the agent consumed it or a later slot inside its window (consuming the latest open
slot supersedes the earlier ones). The reason is a fact where one exists:

    brake      the claim endpoint refused this agent this slot because of the brake; or, with
               no refusal on record, the agent was seen in the window while the platform's brake
               was on (it reads the brake in its config and does not ask: `brake.spans`)
    throttled  … because a cap was full (org_cap or global_cap)
    platform_unavailable  no refusal, and the control plane itself was down during the window
               (no replica's liveness mark covers it: `liveness`)
    offline    no refusal, and the agent was not seen within the window (judged from its stretches
               of polls, so an agent that polls just after the window closed is still offline)
    unreachable  as offline, but the agent said, once it reached the control plane again, that it
               was running and tried to poll or claim inside this slot's window and could not
               reach us (`unreachable_reports`, written by `control_plane.runs.unreachable`):
               the way in was broken (the load balancer, its certificate, DNS, a firewall, the
               host's proxy). The run's `error` and the event keep the agent's first error. It
               replaces `offline` only: a refusal on record, the platform unavailable, a sighting
               keep theirs. The report may come before this pass or after it (it then corrects
               an `offline` miss it finds); both orders end the same, and a lock
               (`control_plane.misses_lock`) keeps a report from falling between the two.
    host_clock seen within the window, no refusal on record, and its host's clock further off
               the control plane's than the agent follows (one day,
               `ground.limits.MAX_HOST_CLOCK_OFFSET_SECONDS`): the agent planned on a wrong clock
               and asked for another day's slot. Judged from `agent_clocks`, the disagreement the
               agent's polls said (their `Date` header), measured in or after the window and
               not put right since; the event keeps the offset. An agent that does not say its
               time (a release before contract 6) keeps the reasons below.
    unknown    seen within the window, but no refusal is on record (e.g. lost in a crash before
               it was written, or the agent first asked in the window's grant margin: a claim
               refused `window_closed` is a sighting too)

Precedence, first that holds: a refusal on record (brake, throttled) > platform_unavailable >
unreachable > offline > brake (seen while the brake was on: it would not have asked on any clock)
> host_clock > unknown.

When both a cap and the brake refused it, the reason refused first most recently wins: that is what
kept the agent out at the end of the window.

One release's brake (or a halt) makes no miss: the agent does not read it in its config, asks, is
refused `release_halted`, and the claim consumes the slot with a `skipped` run
(`rollout.gate.skip_stopped_slot`), so this pass never sees the slot. A miss of an agent offered
such a release is not the brake's doing (it would have asked), and keeps the reasons above.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from uuid import UUID
from zoneinfo import ZoneInfo

from control_plane.brake.spans import read_brake_spans
from control_plane.claims.slots import agents_slot
from control_plane.liveness.marks import read_coverage
from control_plane.reconcile.data import (
    MissedSlot,
    SlotCandidate,
    enabled_schedules,
    insert_missed,
)
from control_plane.types import Connection
from shared_planner import parse_times, slots_on_day

__all__ = ["MissedSlot", "closed_slot_candidates", "record_missed_slots"]


def closed_slot_candidates(
    conn: Connection, *, timezone: str, window: timedelta, after: datetime, until: datetime
) -> list[SlotCandidate]:
    """Every enabled agent's slot whose window closed in (after, until] and after the agent was
    enrolled (`agents_slot`)."""
    by_schedule: dict[tuple[str, ...], list[tuple[UUID, UUID, datetime]]] = defaultdict(list)
    for agent_id, org_id, created_at, times in enabled_schedules(conn):
        by_schedule[times].append((agent_id, org_id, created_at))
    zone = ZoneInfo(timezone)
    # A slot that closes in (after, until] starts at most one window earlier. A slot's key names
    # its local day; the day before and after also hold instants in range when the span touches a
    # local midnight.
    day = (after - window).astimezone(zone).date() - timedelta(days=1)
    final_day = until.astimezone(zone).date() + timedelta(days=1)
    candidates: list[SlotCandidate] = []
    while day <= final_day:
        for times, agents in by_schedule.items():
            for slot in slots_on_day(parse_times(times), day, tz=zone):
                closes = slot.window_closes(window)
                if not after < closes <= until:
                    continue
                candidates.extend(
                    SlotCandidate(
                        agent_id=agent_id,
                        org_id=org_id,
                        slot_key=slot.key,
                        slot_at=slot.at,
                        window_closes=closes,
                    )
                    for agent_id, org_id, created_at in agents
                    if agents_slot(slot, window, created_at)
                )
        day += timedelta(days=1)
    return candidates


def record_missed_slots(
    conn: Connection,
    *,
    timezone: str,
    window: timedelta,
    after: datetime,
    until: datetime,
    now: datetime,
) -> list[MissedSlot]:
    """Insert the missed runs (and their `update.missed` events) for windows closed in
    (after, until]. Safe to repeat: a slot that has a run row is left alone."""
    candidates = closed_slot_candidates(
        conn, timezone=timezone, window=window, after=after, until=until
    )
    if not candidates:
        return []
    coverage = read_coverage(conn, since=min(c.slot_at for c in candidates), until=until)
    brake = read_brake_spans(conn, until=until)
    down: dict[datetime, bool] = {}

    def platform_down(candidate: SlotCandidate) -> bool:
        if candidate.slot_at not in down:
            down[candidate.slot_at] = coverage.was_down(candidate.slot_at, candidate.window_closes)
        return down[candidate.slot_at]

    def braked(candidate: SlotCandidate) -> bool:
        return brake.engaged_during(candidate.slot_at, candidate.window_closes)

    return insert_missed(conn, candidates, now=now, platform_down=platform_down, braked=braked)
