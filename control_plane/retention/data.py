"""Retention's SQL: which rows have expired, their removal in bounded statements, the progress.

Every statement finds its rows through an index (runs by agent and creation, notifications by
organisation and creation, events by run, refusals, unreachable reports and slot reviews by their
key, round counters by their round, sign-in failures by their last attempt) and removes at most
`limit` rows of one table; each is run in its own transaction by the walk, together with the
progress row's counters, so the counters are exact even when a walk stops half-way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from uuid import UUID

from control_plane.seeded_rows import seeded_row
from control_plane.types import Connection

__all__ = [
    "COUNTERS",
    "Phase",
    "WalkState",
    "add_removed",
    "complete_walk",
    "expired_runs",
    "next_owners",
    "read_walk",
    "remove_events_of",
    "remove_expired_notifications",
    "remove_expired_refusals",
    "remove_expired_reviews",
    "remove_expired_rounds",
    "remove_expired_unreachable_reports",
    "remove_forgotten_sign_in_failures",
    "remove_runs",
    "save_walk",
    "start_walk",
]

Phase = Literal["agents", "organisations", "rounds"]


@dataclass(frozen=True, kw_only=True)
class WalkState:
    started_at: datetime | None
    cutoff: datetime | None
    phase: Phase | None
    after: UUID | None
    last_completed_at: datetime | None


def read_walk(conn: Connection) -> WalkState:
    row = seeded_row(
        conn,
        "SELECT walk_started_at, walk_cutoff, walk_phase, walk_after, last_completed_at"
        " FROM retention_progress",
    )
    return WalkState(
        started_at=row["walk_started_at"],
        cutoff=row["walk_cutoff"],
        phase=row["walk_phase"],
        after=row["walk_after"],
        last_completed_at=row["last_completed_at"],
    )


# The progress row's counters, by the name the walk's figures and the metric's label use.
COUNTERS = {
    "runs": "runs_removed",
    "events": "events_removed",
    "notifications": "notifications_removed",
    "claim_refusals": "refusals_removed",
    "slot_reviews": "reviews_removed",
    "claim_rounds": "rounds_removed",
    "unreachable_reports": "unreachable_reports_removed",
    "sign_in_failures": "sign_in_failures_removed",
}
_COUNTED = (
    "jsonb_build_object("
    + ", ".join(f"'{name}', {column}" for name, column in COUNTERS.items())
    + ")"
)


def start_walk(conn: Connection, *, now: datetime, cutoff: datetime) -> None:
    conn.execute(
        "UPDATE retention_progress SET walk_started_at = %s, walk_cutoff = %s,"  # noqa: S608
        f" walk_phase = 'agents', walk_after = NULL, walk_counted_before = {_COUNTED}",
        [now, cutoff],
    )


def save_walk(conn: Connection, *, phase: Phase, after: UUID | None) -> None:
    conn.execute("UPDATE retention_progress SET walk_phase = %s, walk_after = %s", [phase, after])


def complete_walk(conn: Connection, *, now: datetime, by: str) -> dict[str, int]:
    """End the walk under way; returns what it removed, by table."""
    row = seeded_row(
        conn,
        f"SELECT {_COUNTED} AS now_counted, walk_counted_before"  # noqa: S608
        " FROM retention_progress FOR UPDATE",
    )
    before = row["walk_counted_before"] or {}
    conn.execute(
        "UPDATE retention_progress SET walk_started_at = NULL, walk_cutoff = NULL,"
        " walk_phase = NULL, walk_after = NULL, walk_counted_before = NULL,"
        " last_completed_at = %s, last_completed_by = %s, walks_completed = walks_completed + 1",
        [now, by],
    )
    return {
        name: int(count) - int(before.get(name, 0)) for name, count in row["now_counted"].items()
    }


_REMOVED_COLUMNS = frozenset(COUNTERS.values())


def add_removed(conn: Connection, column: str, count: int) -> None:
    assert column in _REMOVED_COLUMNS, column
    if count:
        conn.execute(
            f"UPDATE retention_progress SET {column} = {column} + %s",  # noqa: S608 - a fixed name
            [count],
        )


def next_owners(
    conn: Connection, *, phase: Literal["agents", "organisations"], after: UUID | None, limit: int
) -> list[UUID]:
    """The next agents (deleted ones too: their history expires like any other) or
    organisations in id order, after `after`."""
    table = "agents" if phase == "agents" else "orgs"
    if after is None:
        rows = conn.execute(
            f"SELECT id FROM {table} ORDER BY id LIMIT %s",  # noqa: S608 - a fixed name
            [limit],
        ).fetchall()
    else:
        rows = conn.execute(
            f"SELECT id FROM {table} WHERE id > %s ORDER BY id LIMIT %s",  # noqa: S608
            [after, limit],
        ).fetchall()
    return [row["id"] for row in rows]


# A run may go when it ended before the cutoff and is not one a person or the product still
# reads: each agent's newest run, newest scheduled run and newest run with a version, and the
# evidence of a release halt. The same test guards the selection and the removal, so a run that
# became needed in between (it cannot today) would stay.
_REMOVABLE = """
        r.created_at < %(cutoff)s
    AND r.status NOT IN ('requested', 'claimed')
    AND EXISTS (SELECT 1 FROM runs n
                 WHERE n.agent_id = r.agent_id AND n.created_at > r.created_at)
    AND (r.version IS NULL
         OR EXISTS (SELECT 1 FROM runs n
                     WHERE n.agent_id = r.agent_id AND n.version IS NOT NULL
                       AND n.created_at > r.created_at))
    AND (r.trigger <> 'schedule'
         OR EXISTS (SELECT 1 FROM runs n
                     WHERE n.agent_id = r.agent_id AND n.trigger = 'schedule'
                       AND n.slot_at > r.slot_at))
    AND NOT EXISTS (SELECT 1 FROM release_halt_runs h WHERE h.run_id = r.id)
"""

_EXPIRED_RUNS = f"""
SELECT expired.id
  FROM unnest(%(agents)s::uuid[]) AS a(id)
 CROSS JOIN LATERAL (
        SELECT r.id FROM runs r
         WHERE r.agent_id = a.id AND {_REMOVABLE}
         ORDER BY r.created_at
         LIMIT %(limit)s
       ) expired
 LIMIT %(limit)s
"""  # noqa: S608 - constant conditions


def expired_runs(
    conn: Connection, *, agents: Sequence[UUID], cutoff: datetime, limit: int
) -> list[UUID]:
    rows = conn.execute(
        _EXPIRED_RUNS, {"agents": list(agents), "cutoff": cutoff, "limit": limit}
    ).fetchall()
    return [row["id"] for row in rows]


def remove_events_of(conn: Connection, *, runs: Sequence[UUID], limit: int) -> int:
    """At most `limit` events of these runs; the caller repeats until fewer come back."""
    return conn.execute(
        "DELETE FROM events WHERE id IN ("
        " SELECT id FROM events WHERE run_id = ANY(%(runs)s::uuid[]) LIMIT %(limit)s)",
        {"runs": list(runs), "limit": limit},
    ).rowcount


def remove_runs(conn: Connection, *, runs: Sequence[UUID], cutoff: datetime) -> int:
    """The runs still removable among `runs` (at most the batch the caller chose). A run's
    token, forced-update mark and any event written since its events were removed go with it."""
    return conn.execute(
        f"DELETE FROM runs r WHERE r.id = ANY(%(runs)s::uuid[]) AND {_REMOVABLE}",  # noqa: S608
        {"runs": list(runs), "cutoff": cutoff},
    ).rowcount


def remove_expired_refusals(
    conn: Connection, *, agents: Sequence[UUID], cutoff: datetime, limit: int
) -> int:
    return conn.execute(
        "DELETE FROM claim_refusals WHERE ctid IN ("
        " SELECT ctid FROM claim_refusals"
        "  WHERE agent_id = ANY(%(agents)s::uuid[]) AND first_at < %(cutoff)s"
        "  LIMIT %(limit)s)",
        {"agents": list(agents), "cutoff": cutoff, "limit": limit},
    ).rowcount


def remove_expired_unreachable_reports(
    conn: Connection, *, agents: Sequence[UUID], cutoff: datetime, limit: int
) -> int:
    """What the agents said of slots they could not reach the control plane in: by then the miss
    holds the agent's error, and a report of so old a slot changes nothing."""
    return conn.execute(
        "DELETE FROM unreachable_reports WHERE ctid IN ("
        " SELECT ctid FROM unreachable_reports"
        "  WHERE agent_id = ANY(%(agents)s::uuid[]) AND slot_at < %(cutoff)s"
        "  LIMIT %(limit)s)",
        {"agents": list(agents), "cutoff": cutoff, "limit": limit},
    ).rowcount


def remove_expired_notifications(
    conn: Connection, *, orgs: Sequence[UUID], cutoff: datetime, limit: int
) -> int:
    """A notification goes with its webhook delivery and attempts and its agent mentions; the
    slot review that points at it keeps its decision (the reference is cleared)."""
    return conn.execute(
        """
        DELETE FROM notifications WHERE id IN (
            SELECT expired.id
              FROM unnest(%(orgs)s::uuid[]) AS o(id)
             CROSS JOIN LATERAL (
                    SELECT n.id FROM notifications n
                     WHERE n.org_id = o.id AND n.created_at < %(cutoff)s
                     ORDER BY n.created_at
                     LIMIT %(limit)s
                   ) expired
             LIMIT %(limit)s)
        """,
        {"orgs": list(orgs), "cutoff": cutoff, "limit": limit},
    ).rowcount


def remove_expired_reviews(
    conn: Connection, *, orgs: Sequence[UUID], cutoff: datetime, limit: int
) -> int:
    return conn.execute(
        "DELETE FROM slot_reviews WHERE ctid IN ("
        " SELECT ctid FROM slot_reviews"
        "  WHERE org_id = ANY(%(orgs)s::uuid[]) AND slot_at < %(cutoff)s"
        "  LIMIT %(limit)s)",
        {"orgs": list(orgs), "cutoff": cutoff, "limit": limit},
    ).rowcount


def remove_expired_rounds(conn: Connection, *, cutoff: datetime, limit: int) -> int:
    """The caps' per-round counters: only the current round is ever read."""
    removed = conn.execute(
        "DELETE FROM claim_rounds_org WHERE ctid IN ("
        " SELECT ctid FROM claim_rounds_org WHERE round_start < %(cutoff)s LIMIT %(limit)s)",
        {"cutoff": cutoff, "limit": limit},
    ).rowcount
    if removed >= limit:
        return removed
    return (
        removed
        + conn.execute(
            "DELETE FROM claim_rounds_global WHERE ctid IN ("
            " SELECT ctid FROM claim_rounds_global WHERE round_start < %(cutoff)s"
            "  LIMIT %(limit)s)",
            {"cutoff": cutoff, "limit": limit - removed},
        ).rowcount
    )


def remove_forgotten_sign_in_failures(conn: Connection, *, before: datetime, limit: int) -> int:
    """The failures of addresses not tried since `before`: sign-in has forgotten them already
    (`accounts.people.FAILURES_FORGOTTEN_AFTER`), and each row names an address someone typed."""
    return conn.execute(
        "DELETE FROM sign_in_failures WHERE ctid IN ("
        " SELECT ctid FROM sign_in_failures WHERE last_attempt_at < %(before)s"
        "  LIMIT %(limit)s)",
        {"before": before, "limit": limit},
    ).rowcount
