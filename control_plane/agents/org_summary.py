"""One organisation's agents at a glance, for an operator looking at it: how many are in each of
the list's states (the states `agent_list` filters by, with the same conditions) and which
update slots come next with how many agents each.

Set-based: the states are counted in one pass over the organisation's agents, and the next
slots are planned once per distinct schedule (an organisation's agents share a few), so the
summary costs the same few queries at 20 agents and at 20,000.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from control_plane.agents.agent_list import (
    AGENT_STATES,
    AgentState,
    behind_ids,
    state_condition,
    state_join,
)
from control_plane.settings.services import PlatformSettings
from control_plane.types import Connection
from ground.contract import Instant
from shared_planner import next_slot, parse_times

__all__ = ["DUE_SLOTS", "DueSlot", "OrgAgentSummary", "org_agent_summary"]

# The next slots shown: tonight's and the next few; the list has every agent's own.
DUE_SLOTS = 5


@dataclass(frozen=True, kw_only=True)
class DueSlot:
    """A coming slot instant and how many agents of the organisation have it as their next."""

    at: Instant
    agents: int


@dataclass(frozen=True, kw_only=True)
class OrgAgentSummary:
    total: int
    # Agents per state of the list (an agent may be in several: failed and offline).
    states: tuple[tuple[AgentState, int], ...]
    # The soonest `DUE_SLOTS` next slots, soonest first.
    due: tuple[DueSlot, ...]
    # Agents whose schedule is off (or has no time): no slot comes for them.
    unscheduled: int


def org_agent_summary(
    conn: Connection,
    org_id: UUID,
    *,
    settings: PlatformSettings,
    now: datetime,
    online_since: datetime,
) -> OrgAgentSummary:
    counted = ", ".join(
        f"count(*) FILTER (WHERE {state_condition(state)}) AS {state}" for state in AGENT_STATES
    )
    row = conn.execute(
        f"SELECT count(*) AS total, {counted} FROM agents a"  # noqa: S608 - constant fragments
        + state_join()
        + " WHERE a.org_id = %(org_id)s AND a.deleted_at IS NULL",
        {
            "org_id": org_id,
            "now": now,
            "online_since": online_since,
            "behind": behind_ids(conn, org_id),
        },
    ).fetchone()
    assert row is not None
    schedules = conn.execute(
        "SELECT update_schedule_times AS times, count(*) AS agents FROM agents"
        " WHERE org_id = %s AND deleted_at IS NULL AND update_schedule_enabled"
        " AND jsonb_array_length(update_schedule_times) > 0 GROUP BY update_schedule_times",
        [org_id],
    ).fetchall()
    per_instant: dict[datetime, int] = defaultdict(int)
    for schedule in schedules:
        slot = next_slot(parse_times(tuple(schedule["times"])), after=now, tz=settings.zone)
        per_instant[slot.at] += schedule["agents"]
    scheduled = sum(per_instant.values())
    soonest = sorted(per_instant)[:DUE_SLOTS]
    return OrgAgentSummary(
        total=row["total"],
        states=tuple((state, row[state]) for state in AGENT_STATES),
        due=tuple(DueSlot(at=at, agents=per_instant[at]) for at in soonest),
        unscheduled=row["total"] - scheduled,
    )
