"""Silence made visible: a run row with status `missed` and its reason for every slot whose window
closed without one (DESIGN.md rule 7, issue 7 "Missed slots").

The slots come from `shared_planner.slots_between` over the platform's zone and each enabled
agent's current schedule, from the moment the agent was enrolled. A slot is not missed when the
agent consumed it or a later slot inside its window (consuming the latest open slot supersedes the
earlier ones, rule 8). The reason is a fact where one exists:

    brake      the claim endpoint refused this agent this slot because of the brake
    throttled  … because a cap was full (org_cap or global_cap)
    offline    no refusal, and the agent was not seen since the slot opened
    unknown    seen, but no refusal is on record (e.g. lost in a crash before it was written)

When both a cap and the brake refused it, the reason refused first most recently wins: that is what
kept the agent out at the end of the window.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from control_plane.types import Connection
from shared_planner import parse_times, slots_between

__all__ = ["MissedSlot", "closed_slot_candidates", "record_missed_slots"]

_INSERT_MISSED = """
WITH candidate AS (
    SELECT * FROM unnest(%(agent_ids)s::uuid[], %(org_ids)s::uuid[], %(keys)s::text[],
                         %(ats)s::timestamptz[]) AS c(agent_id, org_id, slot_key, slot_at)
), reasoned AS (
    SELECT c.agent_id, c.org_id, c.slot_key, c.slot_at,
           CASE
               WHEN latest.reason = 'brake' THEN 'brake'
               WHEN latest.reason IS NOT NULL THEN 'throttled'
               WHEN a.last_seen_at IS NULL OR a.last_seen_at < c.slot_at THEN 'offline'
               ELSE 'unknown'
           END AS miss_reason
      FROM candidate c
      JOIN agents a ON a.id = c.agent_id
      LEFT JOIN LATERAL (
            SELECT f.reason FROM claim_refusals f
             WHERE f.agent_id = c.agent_id AND f.slot_key = c.slot_key
             ORDER BY f.first_at DESC, f.reason LIMIT 1
           ) latest ON true
     WHERE NOT EXISTS (
            SELECT 1 FROM runs r
             WHERE r.agent_id = c.agent_id AND r.trigger = 'schedule'
               AND (r.slot_key = c.slot_key
                    OR (r.status <> 'missed' AND r.slot_at > c.slot_at
                        AND r.slot_at < c.slot_at + %(window)s)))
), inserted AS (
    INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, miss_reason,
                      created_at, finished_at)
    SELECT agent_id, org_id, 'schedule', slot_key, slot_at, 'missed', miss_reason,
           %(now)s, slot_at + %(window)s
      FROM reasoned
    ON CONFLICT (agent_id, slot_key) WHERE trigger = 'schedule' DO NOTHING
    RETURNING id, agent_id, org_id, slot_key, slot_at, miss_reason
), timeline AS (
    INSERT INTO events (org_id, agent_id, run_id, kind, actor_kind, at, data)
    SELECT org_id, agent_id, id, 'update.missed', 'schedule', slot_at + %(window)s,
           jsonb_build_object('slot_key', slot_key, 'reason', miss_reason)
      FROM inserted
)
SELECT agent_id, slot_key, slot_at, miss_reason FROM inserted
"""


@dataclass(frozen=True, kw_only=True)
class MissedSlot:
    agent_id: UUID
    slot_key: str
    slot_at: datetime
    reason: str


def closed_slot_candidates(
    conn: Connection, *, timezone: str, window: timedelta, after: datetime, until: datetime
) -> list[tuple[UUID, UUID, str, datetime]]:
    """(agent, org, slot key, instant) of every enabled agent's slot whose window closed in
    (after, until] and that began after the agent was enrolled."""
    rows = conn.execute(
        "SELECT id, org_id, created_at, update_schedule_times AS times FROM agents"
        " WHERE update_schedule_enabled AND jsonb_array_length(update_schedule_times) > 0"
    ).fetchall()
    by_schedule: dict[tuple[str, ...], list[tuple[UUID, UUID, datetime]]] = defaultdict(list)
    for row in rows:
        by_schedule[tuple(row["times"])].append((row["id"], row["org_id"], row["created_at"]))
    # Closing in (after, until] means starting in (after - window, until - window].
    first, last = after - window, until - window
    candidates: list[tuple[UUID, UUID, str, datetime]] = []
    for times, agents in by_schedule.items():
        slots = slots_between(
            parse_times(times), start=first, end=last + timedelta(seconds=1), tz=timezone
        )
        for slot in slots:
            if not first < slot.at <= last:
                continue
            candidates.extend(
                (agent_id, org_id, slot.key, slot.at)
                for agent_id, org_id, created_at in agents
                if slot.at >= created_at
            )
    return candidates


def record_missed_slots(
    conn: Connection,
    *,
    timezone: str,
    window: timedelta,
    after: datetime,
    until: datetime,
    now: datetime,
) -> list[MissedSlot]:
    """Insert the missed runs (and their `update.missed` events) for windows closed in
    (after, until]. Safe to repeat: a slot that has a run row is left alone."""
    candidates = closed_slot_candidates(
        conn, timezone=timezone, window=window, after=after, until=until
    )
    if not candidates:
        return []
    rows = conn.execute(
        _INSERT_MISSED,
        {
            "agent_ids": [candidate[0] for candidate in candidates],
            "org_ids": [candidate[1] for candidate in candidates],
            "keys": [candidate[2] for candidate in candidates],
            "ats": [candidate[3] for candidate in candidates],
            "window": window,
            "now": now,
        },
    ).fetchall()
    return [
        MissedSlot(
            agent_id=row["agent_id"],
            slot_key=row["slot_key"],
            slot_at=row["slot_at"],
            reason=row["miss_reason"],
        )
        for row in rows
    ]
