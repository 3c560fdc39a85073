"""An organisation's default schedule: the one its agents take when they enrol.

Unset, a new agent takes the agents' column defaults (on, at 03:00 in the platform's zone).
Enrolment copies the default into the new agent's row (`accounts.services.add_agent`), so
changing it changes no agent already enrolled. The same rules as an agent's schedule hold it,
here and in the database's CHECK.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from psycopg.types.json import Jsonb

from control_plane.agent_scope import org_not_found
from control_plane.agents.schedule import Schedule, validated_schedule
from control_plane.events.trail import Actor, record_action
from control_plane.types import Connection

__all__ = ["DefaultSchedule", "read_default_schedule", "set_default_schedule"]


@dataclass(frozen=True, kw_only=True)
class DefaultSchedule:
    """The organisation's default for new agents; `schedule` None: it chose none, and new agents
    take the platform's (on, at 03:00)."""

    org_id: UUID
    schedule: Schedule | None


def read_default_schedule(conn: Connection, org_id: UUID) -> DefaultSchedule:
    row = conn.execute(
        "SELECT default_schedule_enabled AS enabled, default_schedule_times AS times"
        " FROM orgs WHERE id = %s",
        [org_id],
    ).fetchone()
    if row is None:
        raise org_not_found(org_id)
    if row["enabled"] is None:
        return DefaultSchedule(org_id=org_id, schedule=None)
    return DefaultSchedule(
        org_id=org_id, schedule=Schedule(enabled=row["enabled"], times=tuple(row["times"]))
    )


def set_default_schedule(
    conn: Connection,
    org_id: UUID,
    *,
    enabled: object,
    times: object,
    now: datetime,
    actor: Actor,
) -> DefaultSchedule:
    """Store the default (checked as an agent's schedule is), in the caller's transaction; a
    change is on the trail with its actor, `before` (None: the platform's) and `after`."""
    schedule = validated_schedule(enabled=enabled, times=times)
    before = read_default_schedule(conn, org_id).schedule
    conn.execute(
        "UPDATE orgs SET default_schedule_enabled = %s, default_schedule_times = %s WHERE id = %s",
        [schedule.enabled, Jsonb(list(schedule.times)), org_id],
    )
    if before != schedule:
        record_action(
            conn,
            kind="default_schedule.changed",
            actor=actor,
            at=now,
            org_id=org_id,
            data={
                "before": None
                if before is None
                else {"enabled": before.enabled, "times": list(before.times)},
                "after": {"enabled": schedule.enabled, "times": list(schedule.times)},
            },
        )
    return DefaultSchedule(org_id=org_id, schedule=schedule)
