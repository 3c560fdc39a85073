"""The timeline: one event per step of a run (DESIGN.md rule 12).

A scheduled update's events are their own kinds with the schedule as the actor, so the timeline
never says a customer started something at 03:00. A manual update's first event,
`update.requested`, names the panel user (their credential) as the actor.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from psycopg.types.json import Jsonb

from control_plane.agents.services import require_agent
from control_plane.types import Connection, Pool
from ground.contract import Instant

__all__ = ["ActorKind", "EventService", "EventView", "Timeline", "list_events", "record_event"]

ActorKind = Literal["schedule", "user", "agent", "operator"]


@dataclass(frozen=True, kw_only=True)
class Actor:
    kind: ActorKind
    id: UUID | None


@dataclass(frozen=True, kw_only=True)
class EventView:
    id: int
    kind: str
    actor: Actor
    run_id: UUID | None
    at: Instant
    data: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class Timeline:
    events: tuple[EventView, ...]


class EventService:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def agent_events(self, org_id: UUID, agent_id: UUID, limit: int = 100) -> Timeline:
        """The agent's timeline, newest first; another organisation's agent is not found."""
        with self._pool.connection() as conn:
            require_agent(conn, org_id, agent_id)
            return Timeline(events=list_events(conn, agent_id, limit))


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


def list_events(conn: Connection, agent_id: UUID, limit: int) -> tuple[EventView, ...]:
    rows = conn.execute(
        "SELECT id, kind, actor_kind, actor_id, run_id, at, data FROM events"
        " WHERE agent_id = %s ORDER BY at DESC, id DESC LIMIT %s",
        [agent_id, limit],
    ).fetchall()
    return tuple(
        EventView(
            id=row["id"],
            kind=row["kind"],
            actor=Actor(kind=row["actor_kind"], id=row["actor_id"]),
            run_id=row["run_id"],
            at=row["at"],
            data=row["data"],
        )
        for row in rows
    )
