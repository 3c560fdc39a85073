"""The timeline: one event per step of a run (DESIGN.md rule 12).

A scheduled update's events are their own kinds with the schedule as the actor, so the timeline
never says a customer started something at 03:00. A manual update's first event,
`update.requested`, names the panel user (their credential) as the actor.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from psycopg.types.json import Jsonb

from control_plane.types import Connection

__all__ = ["ActorKind", "list_events", "record_event"]

ActorKind = Literal["schedule", "user", "agent", "operator"]


def record_event(
    conn: Connection,
    *,
    org_id: UUID,
    agent_id: UUID | None,
    run_id: UUID | None,
    kind: str,
    actor_kind: ActorKind,
    actor_id: UUID | None = None,
    at: datetime,
    data: dict[str, Any] | None = None,
) -> None:
    conn.execute(
        "INSERT INTO events (org_id, agent_id, run_id, kind, actor_kind, actor_id, at, data)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        [org_id, agent_id, run_id, kind, actor_kind, actor_id, at, Jsonb(data or {})],
    )


def list_events(conn: Connection, agent_id: UUID, limit: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT id, kind, actor_kind, actor_id, run_id, at, data FROM events"
        " WHERE agent_id = %s ORDER BY at DESC, id DESC LIMIT %s",
        [agent_id, limit],
    ).fetchall()
    return [
        {
            "id": row["id"],
            "kind": row["kind"],
            "actor": {"kind": row["actor_kind"], "id": row["actor_id"]},
            "run_id": row["run_id"],
            "at": row["at"],
            "data": row["data"],
        }
        for row in rows
    ]
