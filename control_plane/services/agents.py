"""The panel's view of an organisation's agents, and their schedules."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from control_plane.errors import NotFound
from control_plane.schedule import Schedule, validated_schedule
from control_plane.services.run_views import latest_runs
from control_plane.services.settings import PlatformSettings, read_settings
from control_plane.types import Connection, Pool
from ground.clock import Clock
from shared_planner import next_slot, parse_times

__all__ = ["AgentService", "agent_not_found", "next_slot_view"]

LATEST_RUNS = 10

_SELECT_AGENTS = (
    "SELECT id, org_id, name, created_at, current_version, last_seen_at,"
    " update_schedule_enabled, update_schedule_times FROM agents"
)


def agent_not_found(agent_id: UUID) -> NotFound:
    # Another organisation's agent is reported exactly like one that does not exist.
    return NotFound(f"agent {agent_id} does not exist in this organisation", code="agent_not_found")


def _agent_summary(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "org_id": row["org_id"],
        "name": row["name"],
        "created_at": row["created_at"],
        "version": row["current_version"],
        "last_seen_at": row["last_seen_at"],
        "schedule": {
            "enabled": row["update_schedule_enabled"],
            "times": row["update_schedule_times"],
        },
    }


def next_slot_view(
    schedule: dict[str, Any], settings: PlatformSettings, now: datetime
) -> dict[str, Any] | None:
    """The next slot after `now` in the platform's zone, local and as an instant; None when off."""
    if not schedule["enabled"] or not schedule["times"]:
        return None
    slot = next_slot(parse_times(schedule["times"]), after=now, tz=settings.zone)
    return {
        "key": slot.key,
        "local_time": slot.at.astimezone(settings.zone).isoformat(),
        "timezone": settings.timezone,
        "at": slot.at,
    }


class AgentService:
    def __init__(self, pool: Pool, clock: Clock) -> None:
        self._pool = pool
        self._clock = clock

    def list_agents(self, org_id: UUID) -> list[dict[str, Any]]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                _SELECT_AGENTS + " WHERE org_id = %s ORDER BY name, id",
                [org_id],
            ).fetchall()
        return [_agent_summary(row) for row in rows]

    def agent_page(self, org_id: UUID, agent_id: UUID) -> dict[str, Any]:
        now = self._clock.now()
        with self._pool.connection() as conn:
            row = _agent_row(conn, org_id, agent_id)
            settings = read_settings(conn)
            runs = latest_runs(conn, agent_id, LATEST_RUNS)
        page = _agent_summary(row)
        page["next_slot"] = next_slot_view(page["schedule"], settings, now)
        page["latest_runs"] = runs
        return page

    def set_schedule(self, org_id: UUID, agent_id: UUID, *, enabled: object, times: object) -> Any:
        """Validate with the planner's rules (422 naming the bad value) and store, times sorted."""
        schedule: Schedule = validated_schedule(enabled=enabled, times=times)
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute(
                "UPDATE agents SET update_schedule_enabled = %s, update_schedule_times = %s"
                " WHERE id = %s AND org_id = %s RETURNING id",
                [schedule.enabled, Jsonb(list(schedule.times)), agent_id, org_id],
            ).fetchone()
        if row is None:
            raise agent_not_found(agent_id)
        return self.agent_page(org_id, agent_id)


def _agent_row(conn: Connection, org_id: UUID, agent_id: UUID) -> dict[str, Any]:
    row = conn.execute(
        _SELECT_AGENTS + " WHERE id = %s AND org_id = %s", [agent_id, org_id]
    ).fetchone()
    if row is None:
        raise agent_not_found(agent_id)
    return row
