"""The notification decision, once per organisation per slot (DESIGN.md rule 11).

A slot of an organisation is reviewed after its window has closed and every claimed run of it has
finished — or, for a run that never reports, once `outcome_grace` has passed after the window.
The review writes the decision (`slot_reviews`) even when it is silence, stamps
`notify_considered_at` on every finished run of the slot, names a failure only if the agent was not
named for a failure earlier that calendar day (platform zone), and names each enabled agent that
has not consumed a slot for three days once a day. Manual runs never reach a review: it reads
scheduled runs only, and the database refuses a considered manual run.

A run that finishes after its slot was reviewed is considered silently: the organisation already
has that slot's one notification.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Literal
from uuid import UUID
from zoneinfo import ZoneInfo

from psycopg.types.json import Jsonb

from control_plane.reconcile.summary import (
    FAILED_STATUSES,
    SlotOutcome,
    StaleAgent,
    is_worth_telling,
    notification_body,
)
from control_plane.types import Connection

__all__ = ["STALE_AFTER", "ReviewResult", "review_closed_slots"]

STALE_AFTER = timedelta(days=3)

Decision = Literal["waiting", "late", "silent", "notified"]

_PENDING_SLOTS = """
SELECT org_id, slot_key, min(slot_at) AS slot_at
  FROM runs
 WHERE trigger = 'schedule' AND notify_considered_at IS NULL
   AND slot_at <= %(opened_before)s
   AND (status NOT IN ('requested', 'claimed')
        -- A run that never reports holds its slot's review only until the grace has passed.
        OR (status = 'claimed' AND slot_at <= %(stuck_before)s
            AND NOT EXISTS (SELECT 1 FROM slot_reviews v
                             WHERE v.org_id = runs.org_id AND v.slot_key = runs.slot_key)))
 GROUP BY org_id, slot_key
 ORDER BY min(slot_at), org_id
"""

_SLOT_RUNS = """
SELECT r.agent_id, a.name AS agent_name, r.status, r.version, r.error, r.miss_reason
  FROM runs r JOIN agents a ON a.id = r.agent_id
 WHERE r.org_id = %s AND r.slot_key = %s AND r.trigger = 'schedule'
"""

_STALE = """
SELECT a.id, a.name, consumed.last_at
  FROM agents a
  LEFT JOIN LATERAL (
        SELECT max(r.slot_at) AS last_at FROM runs r
         WHERE r.agent_id = a.id AND r.trigger = 'schedule' AND r.status <> 'missed'
       ) consumed ON true
 WHERE a.org_id = %(org_id)s AND a.update_schedule_enabled
   AND coalesce(consumed.last_at, a.created_at) <= %(stale_since)s
   AND NOT EXISTS (SELECT 1 FROM agent_mentions m WHERE m.agent_id = a.id
                     AND m.local_day = %(day)s AND m.kind = 'stale')
"""


@dataclass(frozen=True, kw_only=True)
class ReviewResult:
    reviewed: int
    notified: int
    late_runs_considered: int


def review_closed_slots(
    conn: Connection,
    *,
    zone: ZoneInfo,
    window: timedelta,
    until: datetime,
    outcome_grace: timedelta,
    now: datetime,
) -> ReviewResult:
    """Review every organisation's slot whose window closed by `until`. Each slot in its own
    transaction; repeating it changes nothing."""
    pending = conn.execute(
        _PENDING_SLOTS,
        {"opened_before": until - window, "stuck_before": now - window - outcome_grace},
    ).fetchall()
    reviewed = notified = late = 0
    for slot in pending:
        with conn.transaction():
            outcome = _review_one(
                conn,
                org_id=slot["org_id"],
                slot_key=slot["slot_key"],
                slot_at=slot["slot_at"],
                zone=zone,
                waiting_until=slot["slot_at"] + window + outcome_grace,
                now=now,
            )
        if outcome == "late":
            late += 1
        elif outcome != "waiting":
            reviewed += 1
            notified += outcome == "notified"
    return ReviewResult(reviewed=reviewed, notified=notified, late_runs_considered=late)


def _mark_considered(conn: Connection, org_id: UUID, slot_key: str, now: datetime) -> int:
    return conn.execute(
        "UPDATE runs SET notify_considered_at = %s WHERE org_id = %s AND slot_key = %s"
        " AND trigger = 'schedule' AND notify_considered_at IS NULL"
        " AND status NOT IN ('requested', 'claimed')",
        [now, org_id, slot_key],
    ).rowcount


def _review_one(
    conn: Connection,
    *,
    org_id: UUID,
    slot_key: str,
    slot_at: datetime,
    zone: ZoneInfo,
    waiting_until: datetime,
    now: datetime,
) -> Decision:
    already = conn.execute(
        "SELECT 1 FROM slot_reviews WHERE org_id = %s AND slot_key = %s FOR UPDATE",
        [org_id, slot_key],
    ).fetchone()
    if already is not None:
        _mark_considered(conn, org_id, slot_key, now)
        return "late"
    outcomes = [SlotOutcome(**row) for row in conn.execute(_SLOT_RUNS, [org_id, slot_key])]
    if any(o.status == "claimed" for o in outcomes) and now < waiting_until:
        return "waiting"
    day = date.fromisoformat(slot_key[:10])
    failed = [o.agent_id for o in outcomes if o.status in FAILED_STATUSES]
    reported = {
        row["agent_id"]
        for row in conn.execute(
            "SELECT agent_id FROM agent_mentions WHERE kind = 'failure' AND local_day = %s"
            " AND agent_id = ANY(%s)",
            [day, failed],
        )
    }
    stale = [
        StaleAgent(agent_id=row["id"], agent_name=row["name"], last_consumed_at=row["last_at"])
        for row in conn.execute(
            _STALE, {"org_id": org_id, "stale_since": slot_at - STALE_AFTER, "day": day}
        )
    ]
    newly_named = [agent_id for agent_id in dict.fromkeys(failed) if agent_id not in reported]
    body = notification_body(
        slot_key=slot_key,
        slot_at=slot_at,
        zone=zone,
        outcomes=outcomes,
        newly_named_failures=newly_named,
        stale=stale,
    )
    notification_id = None
    if is_worth_telling(body):
        notification_id = _write_notification(
            conn, org_id=org_id, slot_key=slot_key, slot_at=slot_at, body=body, now=now
        )
        _mention(conn, newly_named, day, "failure", notification_id)
        _mention(conn, [agent.agent_id for agent in stale], day, "stale", notification_id)
    conn.execute(
        "INSERT INTO slot_reviews (org_id, slot_key, slot_at, decided_at, notification_id)"
        " VALUES (%s, %s, %s, %s, %s)",
        [org_id, slot_key, slot_at, now, notification_id],
    )
    _mark_considered(conn, org_id, slot_key, now)
    return "silent" if notification_id is None else "notified"


def _write_notification(
    conn: Connection,
    *,
    org_id: UUID,
    slot_key: str,
    slot_at: datetime,
    body: dict[str, Any],
    now: datetime,
) -> UUID:
    row = conn.execute(
        "INSERT INTO notifications (org_id, slot_key, slot_at, created_at, body)"
        " VALUES (%s, %s, %s, %s, %s) RETURNING id",
        [org_id, slot_key, slot_at, now, Jsonb(body)],
    ).fetchone()
    assert row is not None
    notification_id: UUID = row["id"]
    # Queued for the organisation's webhook, if it has one; the inbox needs nothing more.
    conn.execute(
        "INSERT INTO webhook_deliveries (notification_id, org_id, next_attempt_at)"
        " SELECT %s, org_id, %s FROM webhooks WHERE org_id = %s",
        [notification_id, now, org_id],
    )
    return notification_id


def _mention(
    conn: Connection, agent_ids: list[UUID], day: date, kind: str, notification_id: UUID
) -> None:
    if agent_ids:
        conn.execute(
            "INSERT INTO agent_mentions (agent_id, local_day, kind, notification_id)"
            " SELECT unnest(%s::uuid[]), %s, %s, %s ON CONFLICT DO NOTHING",
            [agent_ids, day, kind, notification_id],
        )
