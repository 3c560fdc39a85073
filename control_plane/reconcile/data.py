"""The worker's own SQL: its progress, the missed-slot rows and the per-slot review's reads and
writes. The passes (`missed`, `review`) decide; this module only reads and writes.

How far the worker has reconciled: windows closed up to `reconciled_until` are done. A pass
continues from there, so a worker that was down for a night (or a replica that takes over)
catches up on every window it did not see; the first pass ever looks back `FIRST_LOOKBACK`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from uuid import UUID

from control_plane.misses_lock import MISSES_LOCK
from control_plane.seeded_rows import seeded_row
from control_plane.types import Connection
from ground.contract import MissReason, RefusalCode

__all__ = [
    "FIRST_LOOKBACK",
    "MissedSlot",
    "Progress",
    "SlotCandidate",
    "advance",
    "enabled_schedules",
    "failures_named_on",
    "insert_missed",
    "mark_runs_considered",
    "mention",
    "pending_slots",
    "read_progress",
    "record_pass",
    "record_review",
    "review_exists",
    "slot_runs",
    "stale_agents",
]

FIRST_LOOKBACK = timedelta(days=1)


# -- progress --------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Progress:
    reconciled_until: datetime | None
    last_pass_at: datetime | None
    last_pass_by: str | None
    passes: int


def read_progress(conn: Connection) -> Progress:
    row = seeded_row(
        conn, "SELECT reconciled_until, last_pass_at, last_pass_by, passes FROM reconcile_progress"
    )
    return Progress(**row)


def advance(conn: Connection, until: datetime) -> None:
    conn.execute(
        "UPDATE reconcile_progress SET reconciled_until = %s"
        " WHERE reconciled_until IS NULL OR reconciled_until < %s",
        [until, until],
    )


def record_pass(conn: Connection, *, at: datetime, by: str) -> None:
    conn.execute(
        "UPDATE reconcile_progress SET last_pass_at = %s, last_pass_by = %s, passes = passes + 1",
        [at, by],
    )


# -- missed slots ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SlotCandidate:
    agent_id: UUID
    org_id: UUID
    slot_key: str
    slot_at: datetime
    # `Slot.window_closes`: the first instant the slot may no longer start.
    window_closes: datetime


@dataclass(frozen=True, kw_only=True)
class MissedSlot:
    agent_id: UUID
    slot_key: str
    slot_at: datetime
    reason: str


def enabled_schedules(conn: Connection) -> list[tuple[UUID, UUID, datetime, tuple[str, ...]]]:
    """(agent, org, enrolled at, times) of every agent whose schedule is on."""
    rows = conn.execute(
        "SELECT id, org_id, created_at, update_schedule_times AS times FROM agents"
        " WHERE update_schedule_enabled AND jsonb_array_length(update_schedule_times) > 0"
        " AND deleted_at IS NULL"
    ).fetchall()
    return [(row["id"], row["org_id"], row["created_at"], tuple(row["times"])) for row in rows]


# The reason is the refusal that kept the agent out at the end of the window; else our own outage
# during the window; else whether the agent was seen WITHIN the window (its current and previous
# stretch of polls), never whether it was seen by the time of the pass. A slot consumed (or
# superseded by a later slot inside its window) is no miss.
#
# Read in a statement of its own, before the insert: in the statement that inserts the misses,
# a check planned as a scan of `runs` (as it is when `runs` was analysed while empty, a new
# fleet's first night) read, for each candidate, every row inserted for the candidates before it.
_UNCONSUMED = """
WITH candidate AS (
    SELECT * FROM unnest(%(agent_ids)s::uuid[], %(org_ids)s::uuid[], %(keys)s::text[],
                         %(ats)s::timestamptz[], %(closes)s::timestamptz[],
                         %(platform_down)s::boolean[], %(seen_reasons)s::text[])
        AS c(agent_id, org_id, slot_key, slot_at, window_closes, platform_down, seen_reason)
)
SELECT c.agent_id, c.org_id, c.slot_key, c.slot_at, c.window_closes,
       CASE
           WHEN latest.reason = %(brake_refusal)s THEN %(brake)s::text
           WHEN latest.reason IS NOT NULL THEN %(throttled)s
           WHEN c.platform_down THEN %(platform_unavailable)s
           -- Not seen: `unreachable` when the agent said it tried in the window and could not
           -- reach us (`unreachable_reports`), else offline.
           WHEN a.last_seen_at IS NULL OR a.last_seen_at < c.slot_at THEN unseen.reason
           -- Seen, no refusal on record: `seen.reason` (brake when the brake was on in the
           -- window, which a braked agent reads in its config and so does not ask; else
           -- host_clock when its host's clock was further off than it follows, measured in or
           -- after the window and not put right since; else unknown).
           -- No stretches recorded (before migration 0009): seen since, but when is unknown.
           WHEN a.online_since IS NULL THEN seen.reason
           -- The current stretch reaches into the window: seen in it, no refusal known.
           WHEN a.online_since < c.window_closes THEN seen.reason
           -- The previous stretch ended inside or after the window: seen, or cannot tell.
           WHEN a.previous_seen_at >= c.slot_at THEN seen.reason
           -- Not seen from before the window opened until after it closed.
           ELSE unseen.reason
       END AS miss_reason,
       clock.offset_seconds AS clock_offset_seconds,
       tried.error AS unreachable_error
  FROM candidate c
  JOIN agents a ON a.id = c.agent_id
  LEFT JOIN unreachable_reports tried
         ON tried.agent_id = c.agent_id AND tried.slot_key = c.slot_key
 CROSS JOIN LATERAL (
        SELECT CASE WHEN tried.agent_id IS NULL THEN %(offline)s ELSE %(unreachable)s END
               AS reason
       ) unseen
  LEFT JOIN agent_clocks clock ON clock.agent_id = c.agent_id AND clock.measured_at >= c.slot_at
 CROSS JOIN LATERAL (
        SELECT CASE WHEN c.seen_reason = %(unknown)s AND clock.agent_id IS NOT NULL
                    THEN %(host_clock)s ELSE c.seen_reason END AS reason
       ) seen
  LEFT JOIN LATERAL (
        SELECT f.reason FROM claim_refusals f
         WHERE f.agent_id = c.agent_id AND f.slot_key = c.slot_key
         ORDER BY f.first_at DESC, f.reason LIMIT 1
       ) latest ON true
 -- Two tests, not one with an OR: each is answered by its own index (the slot's run by the one
 -- per slot, a later slot by the agent's scheduled runs in slot order); an OR of the two used
 -- neither and read every run.
 WHERE NOT EXISTS (
        SELECT 1 FROM runs r
         WHERE r.agent_id = c.agent_id AND r.trigger = 'schedule' AND r.slot_key = c.slot_key)
   AND NOT EXISTS (
        SELECT 1 FROM runs r
         WHERE r.agent_id = c.agent_id AND r.trigger = 'schedule'
           AND r.slot_at > c.slot_at AND r.slot_at < c.window_closes
           AND r.status <> 'missed')
"""

# The misses `_UNCONSUMED` found, in one statement, with their `update.missed` events; a run a
# claim made for the slot meanwhile wins. A `host_clock` miss's event keeps the offset measured
# (`host_clock_offset_seconds`), for the people told to say how far off the clock was; an
# `unreachable` miss keeps the agent's error in the run's `error` and the event's
# `unreachable_error`, as a report that comes after the miss writes them
# (`control_plane.runs.unreachable`).
_INSERT_MISSED = """
WITH inserted AS (
    INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, miss_reason, error,
                      created_at, finished_at)
    SELECT m.agent_id, m.org_id, 'schedule', m.slot_key, m.slot_at, 'missed', m.miss_reason,
           CASE WHEN m.miss_reason = %(unreachable)s THEN m.error END, %(now)s, m.window_closes
      FROM unnest(%(agent_ids)s::uuid[], %(org_ids)s::uuid[], %(keys)s::text[],
                  %(ats)s::timestamptz[], %(closes)s::timestamptz[], %(reasons)s::text[],
                  %(errors)s::text[])
           AS m(agent_id, org_id, slot_key, slot_at, window_closes, miss_reason, error)
    ON CONFLICT (agent_id, slot_key) WHERE trigger = 'schedule' DO NOTHING
    RETURNING id, agent_id, org_id, slot_key, slot_at, finished_at, miss_reason, error
), timeline AS (
    INSERT INTO events (org_id, agent_id, run_id, kind, actor_kind, at, data)
    SELECT i.org_id, i.agent_id, i.id, 'update.missed', 'schedule', i.finished_at,
           jsonb_build_object('slot_key', i.slot_key, 'reason', i.miss_reason)
           || CASE WHEN i.miss_reason = %(host_clock)s
                   THEN jsonb_build_object('host_clock_offset_seconds', o.offset_seconds)
                   WHEN i.miss_reason = %(unreachable)s
                   THEN jsonb_build_object('unreachable_error', i.error)
                   ELSE '{}'::jsonb END
      FROM inserted i
      LEFT JOIN unnest(%(agent_ids)s::uuid[], %(keys)s::text[], %(offsets)s::bigint[])
           AS o(agent_id, slot_key, offset_seconds)
        ON o.agent_id = i.agent_id AND o.slot_key = i.slot_key
)
SELECT agent_id, slot_key, slot_at, miss_reason FROM inserted
"""


# The CASE's answers, named by their value in `ground.contract.MissReason`.
_MISS_REASONS = {reason.value: reason.value for reason in MissReason}


def unconsumed_parameters(
    candidates: Sequence[SlotCandidate],
    platform_down: Callable[[SlotCandidate], bool],
    braked: Callable[[SlotCandidate], bool],
) -> dict[str, object]:
    """`_UNCONSUMED`'s parameters for these candidates."""
    return {
        "agent_ids": [c.agent_id for c in candidates],
        "org_ids": [c.org_id for c in candidates],
        "keys": [c.slot_key for c in candidates],
        "ats": [c.slot_at for c in candidates],
        "closes": [c.window_closes for c in candidates],
        "platform_down": [platform_down(c) for c in candidates],
        "seen_reasons": [
            (MissReason.BRAKE if braked(c) else MissReason.UNKNOWN).value for c in candidates
        ],
        "brake_refusal": RefusalCode.BRAKE.value,
        **_MISS_REASONS,
    }


def missed_parameters(unconsumed: Sequence[dict[str, Any]], now: datetime) -> dict[str, object]:
    """`_INSERT_MISSED`'s parameters for the rows `_UNCONSUMED` found."""
    return {
        "agent_ids": [row["agent_id"] for row in unconsumed],
        "org_ids": [row["org_id"] for row in unconsumed],
        "keys": [row["slot_key"] for row in unconsumed],
        "ats": [row["slot_at"] for row in unconsumed],
        "closes": [row["window_closes"] for row in unconsumed],
        "reasons": [row["miss_reason"] for row in unconsumed],
        "offsets": [row["clock_offset_seconds"] for row in unconsumed],
        "errors": [row["unreachable_error"] for row in unconsumed],
        "host_clock": MissReason.HOST_CLOCK.value,
        "unreachable": MissReason.UNREACHABLE.value,
        "now": now,
    }


def insert_missed(
    conn: Connection,
    candidates: Sequence[SlotCandidate],
    *,
    now: datetime,
    platform_down: Callable[[SlotCandidate], bool] = lambda _candidate: False,
    braked: Callable[[SlotCandidate], bool] = lambda _candidate: False,
) -> list[MissedSlot]:
    """Missed runs (and their `update.missed` events) for the candidates that have no run;
    `platform_down(candidate)` says whether the control plane was down during its window, and
    `braked(candidate)` whether the platform's brake was on during it."""
    if not candidates:
        return []
    # Taken before the misses are read, held until the transaction ends: a report of an
    # unreachable control plane either committed before (and is read here) or waits until these
    # misses are committed (and corrects them). Neither order leaves an `offline` behind.
    conn.execute(MISSES_LOCK)
    unconsumed = conn.execute(
        _UNCONSUMED, unconsumed_parameters(candidates, platform_down, braked)
    ).fetchall()
    if not unconsumed:
        return []
    rows = conn.execute(_INSERT_MISSED, missed_parameters(unconsumed, now)).fetchall()
    return [
        MissedSlot(
            agent_id=row["agent_id"],
            slot_key=row["slot_key"],
            slot_at=row["slot_at"],
            reason=row["miss_reason"],
        )
        for row in rows
    ]


# -- the per-slot review ---------------------------------------------------------------------------

# One review per organisation per slot INSTANT, not per label: on the spring night 02:00 and 03:00
# in Amsterdam are one instant, and agents scheduled at either are one moment to tell about.
# With each slot, the ids of its finished runs not yet considered: once the slot was reviewed these
# are its late runs, stamped by id (`mark_runs_considered`) for the reason given there.
_PENDING_SLOTS = """
SELECT org_id, slot_at,
       array_agg(id) FILTER (WHERE status NOT IN ('requested', 'claimed')) AS finished_run_ids
  FROM runs
 WHERE trigger = 'schedule' AND notify_considered_at IS NULL
   AND slot_at <= %(opened_before)s
   AND (status NOT IN ('requested', 'claimed')
        -- A run that never reports holds its slot's review only until the grace has passed.
        OR (status = 'claimed' AND slot_at <= %(stuck_before)s
            AND NOT EXISTS (SELECT 1 FROM slot_reviews v
                             WHERE v.org_id = runs.org_id AND v.slot_at = runs.slot_at)))
 GROUP BY org_id, slot_at
 ORDER BY slot_at, org_id
"""

# A `host_clock` miss's offset is read from its `update.missed` event (by the run's id, one
# index lookup per such miss), as the missed pass measured it.
_SLOT_RUNS = """
SELECT r.id AS run_id, r.agent_id, a.name AS agent_name, r.status, r.version, r.error,
       r.miss_reason, r.outcome_reason,
       coalesce((SELECT rel.product FROM releases rel WHERE rel.id = r.release_id), 'agent')
       AS product,
       CASE WHEN r.miss_reason = 'host_clock' THEN (
            SELECT (e.data ->> 'host_clock_offset_seconds')::bigint FROM events e
             WHERE e.run_id = r.id AND e.kind = 'update.missed'
               AND jsonb_typeof(e.data -> 'host_clock_offset_seconds') = 'number'
             LIMIT 1)
       END AS host_clock_offset_seconds
  FROM runs r JOIN agents a ON a.id = r.agent_id
 WHERE r.org_id = %s AND r.slot_at = %s AND r.trigger = 'schedule'
"""

# Planned at every run, never kept as a prepared statement: the review fills `agent_mentions` as
# it goes (a new fleet's first night names each of its agents as stale), and a plan kept from the
# first organisations, made while the table was empty, compared each agent of every later
# organisation with every name written so far (a nested loop over a materialised scan): 1.9 s of
# a 10,000-agent fleet's first review instead of 0.4 s. A plan made at each run sees the table's
# current size; later nights have its statistics.
_STALE = """
SELECT a.id, a.name, consumed.last_at
  FROM agents a
  LEFT JOIN LATERAL (
        SELECT max(r.slot_at) AS last_at FROM runs r
         WHERE r.agent_id = a.id AND r.trigger = 'schedule' AND r.status <> 'missed'
       ) consumed ON true
 WHERE a.org_id = %(org_id)s AND a.update_schedule_enabled AND a.deleted_at IS NULL
   AND coalesce(consumed.last_at, a.created_at) <= %(stale_since)s
   AND NOT EXISTS (SELECT 1 FROM agent_mentions m WHERE m.agent_id = a.id
                     AND m.local_day = %(day)s AND m.kind = 'stale')
"""

# By the runs' ids, never by organisation and slot: on a review night the runs not yet considered
# are the whole fleet's runs of the slot, which statistics gathered between nights (when almost
# none waits) do not know of. A statement naming the organisation, the slot and "not yet
# considered" was planned through the index of waiting runs by slot alone, taken for nearly empty,
# and walked the fleet's night for each organisation: 10,000 runs for each of 250, 1.3 to 1.6 s
# of the pass with a year of history or none.
_MARK_RUNS_CONSIDERED = """
UPDATE runs SET notify_considered_at = %(now)s
 WHERE id = ANY(%(run_ids)s) AND status NOT IN ('requested', 'claimed')
"""


def pending_slots(
    conn: Connection, *, opened_before: datetime, stuck_before: datetime
) -> list[dict[str, Any]]:
    """(org_id, slot_at, finished_run_ids) of every organisation's slot instant with runs not yet
    considered; `finished_run_ids` is None when none of them has finished."""
    return conn.execute(
        _PENDING_SLOTS, {"opened_before": opened_before, "stuck_before": stuck_before}
    ).fetchall()


def review_exists(conn: Connection, org_id: UUID, slot_at: datetime) -> bool:
    """Whether the slot instant was reviewed already; locks the review row until the transaction
    ends."""
    row = conn.execute(
        "SELECT 1 FROM slot_reviews WHERE org_id = %s AND slot_at = %s FOR UPDATE",
        [org_id, slot_at],
    ).fetchone()
    return row is not None


def slot_runs(conn: Connection, org_id: UUID, slot_at: datetime) -> list[dict[str, Any]]:
    """The organisation's scheduled runs of one slot instant, whatever label each agent gave it."""
    return conn.execute(_SLOT_RUNS, [org_id, slot_at]).fetchall()


def failures_named_on(conn: Connection, day: date, agent_ids: Sequence[UUID]) -> set[UUID]:
    """Which of these agents a notification already named for a failure on local `day`."""
    return {
        row["agent_id"]
        for row in conn.execute(
            "SELECT agent_id FROM agent_mentions WHERE kind = 'failure' AND local_day = %s"
            " AND agent_id = ANY(%s)",
            [day, list(agent_ids)],
            prepare=False,  # planned at every run, as the stale agents' statement (`_STALE`)
        )
    }


def stale_agents(
    conn: Connection, org_id: UUID, *, stale_since: datetime, day: date
) -> list[dict[str, Any]]:
    """(id, name, last_at) of the organisation's enabled agents that consumed no slot since
    `stale_since` and were not named for it on local `day`."""
    return conn.execute(
        _STALE, {"org_id": org_id, "stale_since": stale_since, "day": day}, prepare=False
    ).fetchall()


def mark_runs_considered(conn: Connection, run_ids: Sequence[UUID], now: datetime) -> int:
    """Stamp the finished ones of these runs (the slot's runs its review read, or a reviewed
    slot's late runs) as considered."""
    return conn.execute(_MARK_RUNS_CONSIDERED, {"now": now, "run_ids": list(run_ids)}).rowcount


def mention(
    conn: Connection, agent_ids: Sequence[UUID], day: date, kind: str, notification_id: UUID
) -> None:
    if agent_ids:
        conn.execute(
            "INSERT INTO agent_mentions (agent_id, local_day, kind, notification_id)"
            " SELECT unnest(%s::uuid[]), %s, %s, %s ON CONFLICT DO NOTHING",
            [list(agent_ids), day, kind, notification_id],
        )


def record_review(
    conn: Connection,
    *,
    org_id: UUID,
    slot_key: str,
    slot_at: datetime,
    now: datetime,
    notification_id: UUID | None,
) -> None:
    conn.execute(
        "INSERT INTO slot_reviews (org_id, slot_key, slot_at, decided_at, notification_id)"
        " VALUES (%s, %s, %s, %s, %s)",
        [org_id, slot_key, slot_at, now, notification_id],
    )
