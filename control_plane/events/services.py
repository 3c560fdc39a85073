"""The timeline: one event per step of a run.

A scheduled update's events are their own kinds with the schedule as the actor, so the timeline
never says a customer started something at 03:00. A manual update's first event,
`update.requested`, names the panel user (their credential) as the actor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, get_args
from uuid import UUID

from psycopg import sql

from control_plane.agent_scope import require_agent
from control_plane.errors import InvalidInput
from control_plane.events.trail import Actor, ActorKind, record_event
from control_plane.inputs import stored_text
from control_plane.types import Connection, Pool
from ground.contract import Instant
from ground.instants import InstantError, format_instant, parse_instant

__all__ = [
    "KIND_PATTERN",
    "MAX_EVENTS_PAGE",
    "MAX_EVENT_ID",
    "Actor",
    "ActorKind",
    "EventFilter",
    "EventService",
    "EventView",
    "Timeline",
    "TrailEvent",
    "TrailPage",
    "event_view",
    "list_events",
    "record_event",
    "trail_instant",
]

MAX_EVENTS_PAGE = 500
# An event's id is a bigint.
MAX_EVENT_ID = 2**63 - 1
ACTOR_KINDS: tuple[str, ...] = get_args(ActorKind)


# A kind asked for has a visible character (a blank one would match nothing: leave it out for
# all), and no NUL (`control_plane.api.limits.STORABLE_TEXT_PATTERN`). ECMA and Python alike.
KIND_PATTERN = r"^[^\u0000]*[^\u0000-\u0020\u007f][^\u0000]*$"


def trail_instant(field: str, text: str | None) -> datetime | None:
    """A bound of the trail (`since`, `until`) as typed: an RFC 3339 instant, or the refusal
    naming `field` (the API's query parameter, the command line's flag)."""
    if text is None:
        return None
    try:
        return parse_instant(text, field=field)
    except InstantError as exc:
        raise InvalidInput(field, text, "is not an RFC 3339 instant", message=str(exc)) from exc


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
        if kind is not None and re.search(KIND_PATTERN, kind) is None:
            raise InvalidInput(
                "kind",
                kind,
                "is blank (expected an event kind, e.g. release.rolled_back, or a family ending "
                "in '.', e.g. credential.; leave it out for every kind)",
            )
        if query.since is not None and query.until is not None and query.until <= query.since:
            raise InvalidInput(
                "until",
                format_instant(query.until),
                f"is not after the start ({format_instant(query.since)}): no event could be in it",
            )
        if query.before_id is not None and not 1 <= query.before_id <= MAX_EVENT_ID:
            raise InvalidInput(
                "before_id", query.before_id, f"is not an event id (expected 1 to {MAX_EVENT_ID})"
            )
        if query.actor_kind is not None and query.actor_kind not in ACTOR_KINDS:
            raise InvalidInput(
                "actor_kind", query.actor_kind, f"is not an actor kind (one of {ACTOR_KINDS})"
            )
        with self._pool.connection() as conn:
            rows = conn.execute(
                _trail_statement(query, kind), _trail_values(query, kind)
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


# Only the filters a query names are written into its SQL: a filter written as `(%s IS NULL OR
# col = %s)` is one generic plan that can use no index, and read every event.
_TRAIL_FILTERS = (
    ("org_id", "org_id = %(org_id)s"),
    ("agent_id", "agent_id = %(agent_id)s"),
    ("actor_kind", "actor_kind = %(actor_kind)s"),
    ("actor_id", "actor_id = %(actor_id)s"),
    ("since", "at >= %(since)s"),
    ("until", "at < %(until)s"),
    ("before_id", "id < %(before_id)s"),
)


def _trail_statement(query: EventFilter, kind: str | None) -> sql.Composed:
    conditions = [
        sql.SQL(condition)
        for field, condition in _TRAIL_FILTERS
        if getattr(query, field) is not None
    ]
    if kind is not None:
        # A family ("credential.") is a prefix: LIKE with the kind's wildcards escaped, which the
        # index on (kind text_pattern_ops, id) answers.
        conditions.append(
            sql.SQL("kind LIKE %(kind_pattern)s" if kind.endswith(".") else "kind = %(kind)s")
        )
    where = sql.SQL(" WHERE ") + sql.SQL(" AND ").join(conditions) if conditions else sql.SQL("")
    return sql.SQL(
        "SELECT id, org_id, agent_id, kind, actor_kind, actor_id, actor_name, run_id, at, data"
        " FROM events{where} ORDER BY id DESC LIMIT %(limit)s"
    ).format(where=where)


def _trail_values(query: EventFilter, kind: str | None) -> dict[str, Any]:
    values: dict[str, Any] = {field: getattr(query, field) for field, _ in _TRAIL_FILTERS}
    return {
        **values,
        "kind": kind,
        "kind_pattern": None if kind is None else _prefix_pattern(kind),
        "limit": query.limit + 1,
    }


def _prefix_pattern(prefix: str) -> str:
    """A LIKE pattern matching what starts with `prefix` (its `_` and `%` taken literally)."""
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


def _view_fields(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "kind": row["kind"],
        "actor": Actor(kind=row["actor_kind"], id=row["actor_id"], name=row["actor_name"]),
        "run_id": row["run_id"],
        "at": row["at"],
        "data": row["data"],
    }


def event_view(row: dict[str, Any]) -> EventView:
    """An event as the timeline shows it, from a row of the events table's columns."""
    return EventView(**_view_fields(row))


def list_events(conn: Connection, agent_id: UUID, limit: int) -> tuple[EventView, ...]:
    rows = conn.execute(
        "SELECT id, kind, actor_kind, actor_id, actor_name, run_id, at, data FROM events"
        " WHERE agent_id = %s ORDER BY at DESC, id DESC LIMIT %s",
        [agent_id, limit],
    ).fetchall()
    return tuple(EventView(**_view_fields(row)) for row in rows)
