"""The version of nachtwacht's own agent (the updater) each host last reported.

Kept in `agent_updater_versions`, one row per agent, beside `agents` rather than in it: adding a
column to `agents` would lock the table every poll and claim reads while a replica of the
previous release serves. Written only when it changed, so a fleet that keeps its version costs no
write. Called by the claims and the run reports, which carry it.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from control_plane.types import Connection

__all__ = ["note_updater_version"]


def note_updater_version(conn: Connection, agent_id: UUID, version: str, now: datetime) -> None:
    """Keep `version` as the agent's, at `now`, when it is not already the one kept."""
    conn.execute(
        "INSERT INTO agent_updater_versions (agent_id, version, reported_at)"
        " VALUES (%s, %s, %s) ON CONFLICT (agent_id) DO UPDATE"
        " SET version = EXCLUDED.version, reported_at = EXCLUDED.reported_at"
        " WHERE agent_updater_versions.version IS DISTINCT FROM EXCLUDED.version",
        [agent_id, version, now],
    )
