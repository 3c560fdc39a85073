"""What an agent pulls every minute: its schedule, the platform's time settings, brake and release.

The answer is the contract's `AgentConfig`. Its ETag covers everything but `server_time`, so an
agent whose config did not change gets a 304.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from control_plane.brake.services import brake_state
from control_plane.errors import NotFound
from control_plane.releases.services import current_release, release_view
from control_plane.settings.services import read_settings
from control_plane.types import Connection, Pool
from ground.contract import (
    AgentConfig,
    AnswerCode,
    BrakeView,
    ManualUpdateView,
    ReleaseView,
    ScheduleView,
)

__all__ = ["AgentConfigService", "VersionedConfig"]

# `last_seen_at` is refreshed at most this often, so a fleet polling every minute does not write a
# row per request.
LAST_SEEN_RESOLUTION = timedelta(seconds=30)


@dataclass(frozen=True, kw_only=True)
class VersionedConfig:
    config: AgentConfig
    etag: str


class AgentConfigService:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def config(self, agent_id: UUID, now: datetime) -> VersionedConfig:
        """The agent's config at `now` (the server's clock), and records that the agent was seen."""
        with self._pool.connection() as conn:
            with conn.transaction():
                conn.execute(
                    "UPDATE agents SET last_seen_at = %(now)s WHERE id = %(id)s"
                    " AND (last_seen_at IS NULL OR last_seen_at <= %(stale)s"
                    "      OR last_seen_at > %(now)s)",
                    {"id": agent_id, "now": now, "stale": now - LAST_SEEN_RESOLUTION},
                )
            timeless = _config(conn, agent_id)
        return VersionedConfig(
            config=timeless.model_copy(update={"server_time": now}), etag=_etag(timeless)
        )


def _config(conn: Connection, agent_id: UUID) -> AgentConfig:
    row = conn.execute(
        "SELECT id, org_id, name, update_schedule_enabled, update_schedule_times"
        " FROM agents WHERE id = %s",
        [agent_id],
    ).fetchone()
    if row is None:
        raise NotFound(f"agent {agent_id} does not exist", code=AnswerCode.AGENT_NOT_FOUND)
    settings = read_settings(conn)
    brake = brake_state(conn)
    return AgentConfig(
        agent_id=row["id"],
        org_id=row["org_id"],
        name=row["name"],
        schedule=ScheduleView(
            enabled=row["update_schedule_enabled"], times=tuple(row["update_schedule_times"])
        ),
        timezone=settings.timezone,
        catch_up_minutes=settings.catch_up_minutes,
        brake=BrakeView(engaged=brake.engaged, reason=brake.reason),
        release=current_release_view(conn),
        manual_update=pending_manual_update(conn, agent_id),
    )


def _etag(timeless: AgentConfig) -> str:
    body = timeless.model_dump(mode="json", exclude={"server_time"})
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return '"' + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32] + '"'


def current_release_view(conn: Connection) -> ReleaseView | None:
    release = current_release(conn)
    return None if release is None else release_view(release)


def pending_manual_update(conn: Connection, agent_id: UUID) -> ManualUpdateView | None:
    """A manual update requested in the panel and not yet finished."""
    row = conn.execute(
        "SELECT id, created_at FROM runs WHERE agent_id = %s AND trigger = 'manual'"
        " AND status IN ('requested', 'claimed') ORDER BY created_at DESC LIMIT 1",
        [agent_id],
    ).fetchone()
    if row is None:
        return None
    return ManualUpdateView(run_id=row["id"], requested_at=row["created_at"])
