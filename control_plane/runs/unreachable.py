"""What an agent says once it reaches the control plane again after a slot's window it tried
through and could not reach us (`UnreachableReport`): kept per slot, and the slot's miss reads
`unreachable` instead of `offline` (the precedence: `control_plane.reconcile.missed`).

The report may come before the missed pass or after it. Before: it is kept, and the pass reads it
when the window closes without a run. After: an `offline` miss of that slot is corrected here, its
run's `error` and its `update.missed` event given the agent's error as the pass gives them. The
pass holds `MISSES_LOCK` while it reads and writes; a report holds it shared, so it either
commits before the pass reads or waits until the pass's misses are committed and corrects them.

A report changes nothing for a slot that ran, was skipped or was missed for a reason that comes
first (a refusal, the platform unavailable, a sighting), nor when the slot was reported before (the
first report is kept): it is answered `unchanged`, saying why. One for a slot that is not this
agent's, that closed before the agent was enrolled, that has not opened yet, older than
`MAX_UNREACHABLE_REPORT_AGE_DAYS`, or whose tries lie outside the slot's window, is refused (422
naming the field). Only the agent's own slots: the
credential names the agent, the body names no other.

A slot is this agent's when a miss of it is on record for this agent, or when its schedule has it.
A miss on record comes first: it keeps the slot's instant and the window's close as the missed
pass judged them, and the tries must lie in that window, whatever changed since (the schedule
changed or was switched off, the operator changed the platform's time zone or catch-up window).
Before the pass, the schedule under the platform's settings now names the slot and its window; a
slot neither on record nor in the schedule is refused.

The notification a slot's review already sent with the miss as `offline` is not sent again: the
panel, the API and `agent status` show the corrected reason from then on.

The error is kept as the agent sent it, inert (`ground.contract.plain_text.inert`): a control
character (a NUL too) or a bidirectional control in it is stored as its visible escape, never
obeyed where it is shown.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from control_plane.agent_scope import unknown_agent
from control_plane.claims.slots import agents_slot
from control_plane.errors import InvalidInput
from control_plane.misses_lock import MISSES_LOCK_SHARED
from control_plane.types import Connection
from ground.contract import MissReason, UnreachableAnswer, UnreachableReport, format_instant
from ground.contract.plain_text import inert
from ground.limits import MAX_UNREACHABLE_ERROR_LENGTH, MAX_UNREACHABLE_REPORT_AGE_DAYS
from shared_planner import PlannerError, Slot, parse_slot_key, slot_for_key

__all__ = ["TRY_TOLERANCE", "record_unreachable"]

MAX_AGE = timedelta(days=MAX_UNREACHABLE_REPORT_AGE_DAYS)
# How far a try may lie outside the slot's window and still count as in it: the agent plans on the
# control plane's clock as it learned it from answers (network delay, drift since the last answer).
TRY_TOLERANCE = timedelta(minutes=5)

_AGENT = """
SELECT a.update_schedule_enabled AS enabled, a.update_schedule_times AS times, s.timezone,
       s.catch_up_minutes, a.created_at AS enrolled_at
  FROM agents a CROSS JOIN platform_settings s
 WHERE a.id = %s AND a.deleted_at IS NULL
"""

_KEEP = """
INSERT INTO unreachable_reports (agent_id, slot_key, slot_at, error, first_tried_at,
                                 last_tried_at, attempts, reported_at)
VALUES (%(agent)s, %(key)s, %(at)s, %(error)s, %(first)s, %(last)s, %(attempts)s, %(now)s)
ON CONFLICT (agent_id, slot_key) DO NOTHING
RETURNING error
"""

# The agent's reports of slots too old to be reported again: nothing reads them any more.
_FORGET = "DELETE FROM unreachable_reports WHERE agent_id = %s AND slot_at < %s"

_CORRECT = """
UPDATE runs SET miss_reason = %(unreachable)s, error = %(error)s
 WHERE agent_id = %(agent)s AND trigger = 'schedule' AND slot_key = %(key)s
   AND status = 'missed' AND miss_reason = %(offline)s
RETURNING id
"""

_CORRECT_EVENT = """
UPDATE events
   SET data = data || jsonb_build_object('reason', %(unreachable)s::text,
                                         'unreachable_error', %(error)s::text)
 WHERE run_id = %(run)s AND kind = 'update.missed'
"""

# A miss of this agent's slot on record: the slot was in the schedule the missed pass read, and
# the run keeps the window the pass judged it by (a miss the pass wrote finishes when its window
# closes; one a claim wrote, `held`, has no finish).
_MISS_ON_RECORD = """
SELECT slot_at, finished_at AS window_closes FROM runs
 WHERE agent_id = %s AND trigger = 'schedule' AND slot_key = %s AND status = 'missed'
"""

_SLOT_RUN = """
SELECT status, miss_reason, skip_reason FROM runs
 WHERE agent_id = %s AND trigger = 'schedule' AND slot_key = %s
"""


def _slot(
    conn: Connection,
    agent_id: UUID,
    agent: dict[str, Any],
    report: UnreachableReport,
    now: datetime,
) -> tuple[Slot, datetime]:
    """The slot the report names and when its window closes: a miss of it on record (its window
    as the missed pass judged it, whatever the schedule or the platform's zone and catch-up
    window say since), else the agent's schedule under the platform's settings now."""
    key = report.slot_key
    try:
        day, wall = parse_slot_key(key)
    except (PlannerError, OverflowError) as exc:
        raise InvalidInput("slot_key", key, f"is not a slot key ({exc})") from exc
    times = agent["times"] if isinstance(agent["times"], list) else []
    scheduled = bool(agent["enabled"]) and bool(times)
    catch_up = timedelta(minutes=agent["catch_up_minutes"])
    slot = None
    missed = conn.execute(_MISS_ON_RECORD, [agent_id, key]).fetchone()
    if missed is not None:
        slot = Slot(key=key, day=day, wall=wall, at=missed["slot_at"])
        # A miss the claim wrote (`held`, when the claim came) has no close on record.
        closes: datetime = missed["window_closes"] or slot.window_closes(catch_up)
    elif scheduled:
        try:
            slot = slot_for_key(times, key, tz=str(agent["timezone"]))
        except (PlannerError, OverflowError) as exc:
            raise InvalidInput("slot_key", key, f"is not a slot key ({exc})") from exc
        if slot is not None:
            closes = slot.window_closes(catch_up)
    if slot is None and not scheduled:
        raise InvalidInput(
            "slot_key",
            key,
            "is not a slot: scheduled updates are off for this agent, and no miss of this slot "
            "is on record",
        )
    if slot is None:
        raise InvalidInput(
            "slot_key",
            key,
            f"is not one of this agent's slots (times {times}), and no miss of it is on record",
        )
    if not agents_slot(slot, catch_up, agent["enrolled_at"]):
        # The rule of the claim and the missed pass (`claims.slots.agents_slot`).
        raise InvalidInput(
            "slot_key",
            key,
            f"closed ({format_instant(slot.window_closes(catch_up))}) before the agent was "
            f"enrolled ({format_instant(agent['enrolled_at'])}): it was never this agent's slot",
        )
    if slot.at > now:
        raise InvalidInput(
            "slot_key", key, f"has not started yet (it opens at {format_instant(slot.at)})"
        )
    if slot.at < now - MAX_AGE:
        raise InvalidInput(
            "slot_key",
            key,
            f"is older than {MAX_UNREACHABLE_REPORT_AGE_DAYS} days: its miss is no longer "
            "corrected",
        )
    return slot, closes


def _check_tries(slot: Slot, closes: datetime, report: UnreachableReport, now: datetime) -> None:
    opens, until = slot.at - TRY_TOLERANCE, closes + TRY_TOLERANCE
    window = f"from {format_instant(slot.at)} until {format_instant(closes)}"
    for field, at in (
        ("first_tried_at", report.first_tried_at),
        ("last_tried_at", report.last_tried_at),
    ):
        if not opens <= at <= until:
            raise InvalidInput(
                field, format_instant(at), f"is not inside the slot's window ({window})"
            )
        if at > now + TRY_TOLERANCE:
            raise InvalidInput(field, format_instant(at), "is in the future")


def record_unreachable(
    conn: Connection, agent_id: UUID, report: UnreachableReport, now: datetime
) -> UnreachableAnswer:
    """Keep the report and correct the slot's `offline` miss, if any (see the module)."""
    agent = conn.execute(_AGENT, [agent_id]).fetchone()
    if agent is None:
        raise unknown_agent(agent_id)
    slot, closes = _slot(conn, agent_id, agent, report, now)
    _check_tries(slot, closes, report, now)
    key = report.slot_key
    error = inert(report.error, MAX_UNREACHABLE_ERROR_LENGTH)

    def answer(result: str, message: str) -> UnreachableAnswer:
        return UnreachableAnswer.model_validate(
            {"slot_key": key, "result": result, "message": message}
        )

    with conn.transaction():
        conn.execute(MISSES_LOCK_SHARED)
        conn.execute(_FORGET, [agent_id, now - MAX_AGE])
        kept = conn.execute(
            _KEEP,
            {
                "agent": agent_id,
                "key": key,
                "at": slot.at,
                "error": error,
                "first": report.first_tried_at,
                "last": report.last_tried_at,
                "attempts": report.attempts,
                "now": now,
            },
        ).fetchone()
        if kept is None:
            return answer("unchanged", f"slot {key} was reported before: the first report is kept")
        corrected = conn.execute(
            _CORRECT,
            {
                "agent": agent_id,
                "key": key,
                "error": error,
                "unreachable": MissReason.UNREACHABLE.value,
                "offline": MissReason.OFFLINE.value,
            },
        ).fetchone()
        if corrected is not None:
            conn.execute(
                _CORRECT_EVENT,
                {
                    "run": corrected["id"],
                    "error": error,
                    "unreachable": MissReason.UNREACHABLE.value,
                },
            )
            return answer(
                "corrected", f"slot {key}: the miss recorded as offline now reads unreachable"
            )
        run = conn.execute(_SLOT_RUN, [agent_id, key]).fetchone()
    if run is None:
        return answer(
            "recorded",
            f"slot {key}: kept; if its window closes without a run, the miss reads unreachable",
        )
    said = run["miss_reason"] or run["skip_reason"]
    return answer(
        "unchanged",
        f"slot {key} has a run ({run['status']}" + (f": {said}" if said else "") + "): "
        "nothing changed",
    )
