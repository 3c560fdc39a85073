"""The timeline: one event per step of a run.

A scheduled update's events are their own kinds with the schedule as the actor, so the timeline
never says a customer started something at 03:00. A manual update's first event,
`update.requested`, names the panel user (their credential) as the actor.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, get_args
from uuid import UUID

from control_plane.agent_scope import require_agent
from control_plane.errors import InvalidInput
from control_plane.events.trail import Actor, ActorKind, record_event
from control_plane.inputs import stored_text
from control_plane.types import Connection, Pool
from ground.contract import Instant

__all__ = [
    "MAX_EVENTS_PAGE",
    "Actor",
    "ActorKind",
    "EventFilter",
    "EventService",
    "EventView",
    "Timeline",
    "TrailEvent",
    "TrailPage",
    "list_events",
    "record_event",
]

MAX_EVENTS_PAGE = 500
ACTOR_KINDS: tuple[str, ...] = get_args(ActorKind)


@dataclass(frozen=True, kw_only=True)
class EventFilter:
    """The operators' query of the trail; every field narrows it, none is required."""

    org_id: UUID | None = None
    agent_id: UUID | None = None
    kind: str | None = None  # exact, or a family ending in "." ("credential.")
    actor_kind: str | None = None
    actor_id: UUID | None = None
    since: datetime | None = None
    until: datetime | None = None
    before_id: int | None = None  # the next page: events older than this id
    limit: int = 100


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


@dataclass(frozen=True, kw_only=True)
class TrailEvent(EventView):
    org_id: UUID | None
    agent_id: UUID | None


@dataclass(frozen=True, kw_only=True)
class TrailPage:
    """Newest first; `next_before_id` asks for the page after this one (None: this is the last)."""

    events: tuple[TrailEvent, ...]
    next_before_id: int | None


class EventService:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def agent_events(self, org_id: UUID, agent_id: UUID, limit: int = 100) -> Timeline:
        """The agent's timeline, newest first; another organisation's agent is not found."""
        with self._pool.connection() as conn:
            require_agent(conn, org_id, agent_id)
            return Timeline(events=list_events(conn, agent_id, limit))

    def trail(self, query: EventFilter) -> TrailPage:
        """The operators' view of every event (deleted agents' included), newest first."""
        if not 1 <= query.limit <= MAX_EVENTS_PAGE:
            raise InvalidInput(
                "limit", query.limit, f"is out of range (expected 1 to {MAX_EVENTS_PAGE})"
            )
        kind = stored_text("kind", query.kind, 100)
        if query.actor_kind is not None and query.actor_kind not in ACTOR_KINDS:
            raise InvalidInput(
                "actor_kind", query.actor_kind, f"is not an actor kind (one of {ACTOR_KINDS})"
            )
        family = kind is not None and kind.endswith(".")
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT id, org_id, agent_id, kind, actor_kind, actor_id, actor_name, run_id, at,"
                " data FROM events"
                " WHERE (%(org)s::uuid IS NULL OR org_id = %(org)s)"
                " AND (%(agent)s::uuid IS NULL OR agent_id = %(agent)s)"
                " AND (%(kind)s::text IS NULL OR (CASE WHEN %(family)s"
                "      THEN starts_with(kind, %(kind)s) ELSE kind = %(kind)s END))"
                " AND (%(actor_kind)s::text IS NULL OR actor_kind = %(actor_kind)s)"
                " AND (%(actor)s::uuid IS NULL OR actor_id = %(actor)s)"
                " AND (%(since)s::timestamptz IS NULL OR at >= %(since)s)"
                " AND (%(until)s::timestamptz IS NULL OR at < %(until)s)"
                " AND (%(before)s::bigint IS NULL OR id < %(before)s)"
                " ORDER BY id DESC LIMIT %(limit)s",
                {
                    "org": query.org_id,
                    "agent": query.agent_id,
                    "kind": kind,
                    "family": family,
                    "actor_kind": query.actor_kind,
                    "actor": query.actor_id,
                    "since": query.since,
                    "until": query.until,
                    "before": query.before_id,
                    "limit": query.limit + 1,
                },
            ).fetchall()
        page = rows[: query.limit]
        more = len(rows) > query.limit
        return TrailPage(
            events=tuple(
                TrailEvent(**_view_fields(row), org_id=row["org_id"], agent_id=row["agent_id"])
                for row in page
            ),
            next_before_id=page[-1]["id"] if more and page else None,
        )


def _view_fields(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "kind": row["kind"],
        "actor": Actor(kind=row["actor_kind"], id=row["actor_id"], name=row["actor_name"]),
        "run_id": row["run_id"],
        "at": row["at"],
        "data": row["data"],
    }


def list_events(conn: Connection, agent_id: UUID, limit: int) -> tuple[EventView, ...]:
    rows = conn.execute(
        "SELECT id, kind, actor_kind, actor_id, actor_name, run_id, at, data FROM events"
        " WHERE agent_id = %s ORDER BY at DESC, id DESC LIMIT %s",
        [agent_id, limit],
    ).fetchall()
    return tuple(EventView(**_view_fields(row)) for row in rows)
