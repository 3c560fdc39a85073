"""What an agent pulls every minute: its schedule, the platform's time settings, brake and release.

The ETag covers everything but `server_time`, so an agent whose config did not change gets a 304.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from control_plane.errors import NotFound
from control_plane.services.brake import brake_state
from control_plane.services.releases import current_release, release_view
from control_plane.services.settings import read_settings
from control_plane.types import Connection, Pool
from ground.clock import Clock
from ground.contract import format_instant

__all__ = ["AgentConfig", "AgentConfigService"]

# `last_seen_at` is refreshed at most this often, so a fleet polling every minute does not write a
# row per request.
LAST_SEEN_RESOLUTION = timedelta(seconds=30)


@dataclass(frozen=True, kw_only=True)
class AgentConfig:
    body: dict[str, Any]
    etag: str


class AgentConfigService:
    def __init__(self, pool: Pool, clock: Clock) -> None:
        self._pool = pool
        self._clock = clock

    def config(self, agent_id: UUID, now: datetime) -> AgentConfig:
        """The agent's config at `now` (the server's clock), and records that the agent was seen."""
        with self._pool.connection() as conn:
            with conn.transaction():
                conn.execute(
                    "UPDATE agents SET last_seen_at = %(now)s WHERE id = %(id)s"
                    " AND (last_seen_at IS NULL OR last_seen_at <= %(stale)s"
                    "      OR last_seen_at > %(now)s)",
                    {"id": agent_id, "now": now, "stale": now - LAST_SEEN_RESOLUTION},
                )
            body = self._body(conn, agent_id)
        etag = _etag(body)
        body["server_time"] = format_instant(now)
        return AgentConfig(body=body, etag=etag)

    def _body(self, conn: Connection, agent_id: UUID) -> dict[str, Any]:
        row = conn.execute(
            "SELECT id, org_id, name, update_schedule_enabled, update_schedule_times"
            " FROM agents WHERE id = %s",
            [agent_id],
        ).fetchone()
        if row is None:
            raise NotFound(f"agent {agent_id} does not exist", code="agent_not_found")
        settings = read_settings(conn)
        return {
            "agent_id": str(row["id"]),
            "org_id": str(row["org_id"]),
            "name": row["name"],
            "schedule": {
                "enabled": row["update_schedule_enabled"],
                "times": row["update_schedule_times"],
            },
            "timezone": settings.timezone,
            "catch_up_minutes": settings.catch_up_minutes,
            "brake": brake_view(conn),
            "release": current_release_view(conn),
            "manual_update": pending_manual_update(conn, agent_id),
        }


def _etag(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return '"' + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32] + '"'


def brake_view(conn: Connection) -> dict[str, Any]:
    state = brake_state(conn)
    return {"engaged": state["engaged"], "reason": state["reason"]}


def current_release_view(conn: Connection) -> dict[str, Any] | None:
    release = current_release(conn)
    return None if release is None else release_view(release)


def pending_manual_update(conn: Connection, agent_id: UUID) -> dict[str, Any] | None:
    """A manual update requested in the panel and not yet finished."""
    row = conn.execute(
        "SELECT id, created_at FROM runs WHERE agent_id = %s AND trigger = 'manual'"
        " AND status IN ('requested', 'claimed') ORDER BY created_at DESC LIMIT 1",
        [agent_id],
    ).fetchone()
    if row is None:
        return None
    return {"run_id": str(row["id"]), "requested_at": format_instant(row["created_at"])}
