"""One organisation's agents at a glance, for an operator looking at it: how many are in each of
the list's states (the states `agent_list` filters by, with the same conditions) and which
update slots come next with how many agents each (a held agent at the first slot its hold lets
run).

Set-based: the states are counted in one pass over the organisation's agents, and the next
slots are planned once per distinct schedule and hold end (an organisation's agents share a
few), so the
summary costs the same few queries at 20 agents and at 20,000.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
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

# The organisation's scheduled agents grouped by schedule and by the end of the hold they are
# under (none: not held), so a held agent is counted at the first slot its hold lets run.
_SCHEDULES = """
SELECT a.update_schedule_times AS times, h.until AS held_until, count(*) AS agents
  FROM agents a LEFT JOIN holds h ON h.agent_id = a.id AND h.until > %(now)s
 WHERE a.org_id = %(org_id)s AND a.deleted_at IS NULL AND a.update_schedule_enabled
   AND jsonb_array_length(a.update_schedule_times) > 0
 GROUP BY a.update_schedule_times, h.until
"""
_JUST_BEFORE = timedelta(microseconds=1)


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
    schedules = conn.execute(_SCHEDULES, {"org_id": org_id, "now": now}).fetchall()
    per_instant: dict[datetime, int] = defaultdict(int)
    for schedule in schedules:
        # A hold skips every slot before its end; the slot at its end runs.
        held_until = schedule["held_until"]
        after = now if held_until is None else max(now, held_until - _JUST_BEFORE)
        slot = next_slot(parse_times(tuple(schedule["times"])), after=after, tz=settings.zone)
        per_instant[slot.at] += schedule["agents"]
    scheduled = sum(per_instant.values())
    soonest = sorted(per_instant)[:DUE_SLOTS]
    return OrgAgentSummary(
        total=row["total"],
        states=tuple((state, row[state]) for state in AGENT_STATES),
        due=tuple(DueSlot(at=at, agents=per_instant[at]) for at in soonest),
        unscheduled=row["total"] - scheduled,
    )
