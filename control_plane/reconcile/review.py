"""The notification decision, once per organisation per slot.

A slot is an instant: runs are grouped by `slot_at`, never by their label, so agents scheduled at
02:00 and at 03:00 on the spring night (one instant in Amsterdam) make one notification, named by
the instant's wall time (`instant_key`).

A slot of an organisation is reviewed after its window has closed and every claimed run of it has
finished — or, for a run that never reports, once `outcome_grace` has passed after the window.
The review writes the decision (`slot_reviews`) even when it is silence, stamps
`notify_considered_at` on every finished run of the slot, names a failure only if the agent was not
named for a failure earlier that calendar day (platform zone), and names each enabled agent that
has not consumed a slot for three days once a day. Manual runs never reach a review: it reads
scheduled runs only, and the database refuses a considered manual run.

A run that finishes after its slot was reviewed is considered silently: the organisation already
has that slot's one notification. It is stamped by its id, read with the slot by the pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Literal
from uuid import UUID
from zoneinfo import ZoneInfo

from control_plane.notifications.services import write_notification
from control_plane.notifications.summary import (
    FAILED_STATUSES,
    SlotOutcome,
    StaleAgent,
    is_worth_telling,
    notification_body,
)
from control_plane.reconcile import data
from control_plane.types import Connection
from ground.contract import MissReason, stored_code
from shared_planner import Slot, latest_closed_slot, slot_key

__all__ = ["STALE_AFTER", "ReviewResult", "instant_key", "review_closed_slots"]

STALE_AFTER = timedelta(days=3)

Decision = Literal["waiting", "late", "silent", "notified"]


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
    pending = data.pending_slots(
        conn,
        opened_before=latest_closed_slot(until, window),
        stuck_before=latest_closed_slot(now - outcome_grace, window),
    )
    reviewed = notified = late = 0
    for row in pending:
        slot = instant_slot(row["slot_at"], zone)
        with conn.transaction():
            outcome = _review_one(
                conn,
                org_id=row["org_id"],
                slot_key=slot.key,
                slot_at=slot.at,
                finished_run_ids=row["finished_run_ids"] or [],
                zone=zone,
                waiting_until=slot.window_closes(window) + outcome_grace,
                now=now,
            )
        if outcome == "late":
            late += 1
        elif outcome != "waiting":
            reviewed += 1
            notified += outcome == "notified"
    return ReviewResult(reviewed=reviewed, notified=notified, late_runs_considered=late)


def _review_one(
    conn: Connection,
    *,
    org_id: UUID,
    slot_key: str,
    slot_at: datetime,
    finished_run_ids: Sequence[UUID],
    zone: ZoneInfo,
    waiting_until: datetime,
    now: datetime,
) -> Decision:
    if data.review_exists(conn, org_id, slot_at):
        # The pass found these runs finished and not yet considered: they finished after the
        # review. A run that finishes after that read waits for the next pass.
        data.mark_runs_considered(conn, finished_run_ids, now)
        return "late"
    runs = data.slot_runs(conn, org_id, slot_at)
    run_ids = [row.pop("run_id") for row in runs]
    outcomes = [
        SlotOutcome(**{**row, "miss_reason": stored_code(MissReason, row["miss_reason"])})
        for row in runs
    ]
    if any(o.status == "claimed" for o in outcomes) and now < waiting_until:
        return "waiting"
    day = date.fromisoformat(slot_key[:10])
    failed = [o.agent_id for o in outcomes if o.status in FAILED_STATUSES]
    reported = data.failures_named_on(conn, day, failed)
    stale = [
        StaleAgent(agent_id=row["id"], agent_name=row["name"], last_consumed_at=row["last_at"])
        for row in data.stale_agents(conn, org_id, stale_since=slot_at - STALE_AFTER, day=day)
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
        notification_id = write_notification(
            conn, org_id=org_id, slot_key=slot_key, slot_at=slot_at, body=body, now=now
        )
        data.mention(conn, newly_named, day, "failure", notification_id)
        data.mention(conn, [agent.agent_id for agent in stale], day, "stale", notification_id)
    data.record_review(
        conn,
        org_id=org_id,
        slot_key=slot_key,
        slot_at=slot_at,
        now=now,
        notification_id=notification_id,
    )
    # No run of the slot was considered before its review (this transaction writes both), so the
    # runs just read are all there is to stamp.
    data.mark_runs_considered(conn, run_ids, now)
    return "silent" if notification_id is None else "notified"


def instant_key(slot_at: datetime, zone: ZoneInfo) -> str:
    """The name of a slot instant: its wall time in the platform zone. Two schedule labels on one
    instant (02:00 and 03:00 on the spring night, 02:00 moved forward by the gap) share it, and it
    says the time it really was."""
    local = slot_at.astimezone(zone)
    return slot_key(local.date(), local.time())


def instant_slot(slot_at: datetime, zone: ZoneInfo) -> Slot:
    """The slot instant under its `instant_key`."""
    local = slot_at.astimezone(zone)
    return Slot(key=instant_key(slot_at, zone), day=local.date(), wall=local.time(), at=slot_at)
