"""An agent's report of how a claimed run ended, judged against its lease.

A switch (`succeeded`, `rolled_back`) at `switched_at` (else the receipt time) after the run's
token was revoked or expired, or after its window closed, is stored as `unauthorised`; the caller
then refuses it with 409 `outcome_not_authorised`. The same outcome again changes nothing; a run
the worker ended for want of a report (`outcome_inferred`) takes the report that comes late.

An agent whose download failed until its window closed cannot tell our outage from its own
network (nothing answered either way): when the control plane itself was down between the grant
and the window's end (`control_plane.liveness`), the run's reason is `platform_unavailable` — the
agent's own reason kept in the event — so a customer is never told it was their side.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from control_plane.errors import Conflict
from control_plane.events.services import ActorKind, record_event
from control_plane.liveness.marks import read_coverage
from control_plane.runs.authority import (
    SWITCH_OUTCOMES,
    lease_refusal,
    read_lease,
    unauthorised_switch,
    window_closes_at,
)
from control_plane.runs.current_version import report_version
from control_plane.types import Connection
from control_plane.updater_versions import note_updater_version
from ground.contract import AnswerCode, OutcomeReason, format_instant

__all__ = ["Outcome", "record_outcome"]


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """An agent's report of how a claimed run ended, checked and ready to store."""

    status: str
    version: str | None
    error: str | None
    reason: str | None
    switched_at: datetime | None
    # The version of nachtwacht's own agent that sends the report (None: it did not say).
    updater_version: str | None = None
    # How the build came (`patch`, `full`) and why an offered patch was not used (None: the
    # agent did not say).
    delivery: str | None = None
    patch_fallback_reason: str | None = None


def record_outcome(
    conn: Connection, agent_id: UUID, run_id: UUID, reported: Outcome, now: datetime
) -> str | None:
    """Record the report in the caller's transaction. Returns None when it was recorded (or was
    the same report again), else why the switch was not authorised (recorded as
    `unauthorised`). Raises `run_not_found`, or `run_not_claimed` for a contradicting outcome."""
    lease = read_lease(conn, agent_id, run_id, for_update=True)
    refusal = _refused_switch(lease, reported, now)
    if refusal is None and not _is_open(lease, reported):
        return None
    if refusal is None or lease["status"] != "unauthorised":
        _finish(conn, agent_id, lease, reported, refusal, now)
    return refusal


def _refused_switch(lease: dict[str, Any], reported: Outcome, now: datetime) -> str | None:
    """The refusal's words when the report is a switch the lease did not cover."""
    if reported.status not in SWITCH_OUTCOMES:
        return None
    if lease["status"] == "unauthorised":
        return "it was already refused"
    if lease["status"] != "claimed" and not lease["outcome_inferred"]:
        return None
    at = reported.switched_at or now
    if unauthorised_switch(lease, at) is None:
        return None
    return lease_refusal(lease, at)


def _is_open(lease: dict[str, Any], reported: Outcome) -> bool:
    """True when the report is to be recorded; False when it is the same one again. Raises
    `run_not_claimed` for an outcome that contradicts the recorded one."""
    if lease["status"] == "claimed" or lease["outcome_inferred"]:
        return True
    if lease["status"] == reported.status:
        return False
    raise Conflict(
        f"status: run {lease['id']} is {lease['status']}; an outcome is reported once, "
        "for a claimed run",
        code=AnswerCode.RUN_NOT_CLAIMED,
    )


def _finish(
    conn: Connection,
    agent_id: UUID,
    lease: dict[str, Any],
    reported: Outcome,
    refusal: str | None,
    now: datetime,
) -> None:
    run_id = lease["id"]
    stored = "unauthorised" if refusal is not None else reported.status
    reason = _true_reason(conn, lease, reported)
    conn.execute(
        "UPDATE runs SET status = %s, version = %s, error = %s, outcome_reason = %s,"
        " switched_at = %s, outcome_inferred = false, finished_at = %s WHERE id = %s",
        [
            stored,
            reported.version,
            reported.error,
            reason,
            reported.switched_at,
            now,
            run_id,
        ],
    )
    _record_delivery(conn, run_id, reported)
    conn.execute(
        "UPDATE tokens SET revoked_at = %s, revoked_reason = 'finished'"
        " WHERE run_id = %s AND revoked_at IS NULL",
        [now, run_id],
    )
    # What the host runs, authorised or not: the run's version is the managed agent's, or for
    # a self-update the version of nachtwacht's own agent (after a rollback, the old one).
    updater = lease["product"] == "updater"
    running_updater = reported.version if updater else reported.updater_version
    if reported.version is not None and not updater:
        report_version(conn, agent_id, reported.version, lease["created_at"])
    if running_updater is not None:
        note_updater_version(conn, agent_id, running_updater, now)
    scheduled = lease["trigger"] == "schedule"
    actor: ActorKind = "schedule" if scheduled else "user"
    data: dict[str, Any] = {
        "slot_key": lease["slot_key"],
        "version": reported.version,
        "error": reported.error,
        "reason": reason,
    }
    if reason != reported.reason:
        data["agent_reason"] = reported.reason
    if updater:
        data["product"] = "updater"
    if reported.switched_at is not None:
        data["switched_at"] = format_instant(reported.switched_at)
    if refusal is not None:
        data.update(reported_status=reported.status, refused=refusal)
    if lease["outcome_inferred"]:
        data["replaces_inferred"] = True
    record_event(
        conn,
        org_id=lease["org_id"],
        agent_id=agent_id,
        run_id=run_id,
        kind=f"update.{stored}",
        actor_kind=actor,
        actor_id=None if scheduled else lease["requested_by"],
        at=now,
        data=data,
    )


def _record_delivery(conn: Connection, run_id: UUID, reported: Outcome) -> None:
    """How the run's build came; a fallback counted by its reason. A run's outcome is recorded
    once (the same report again, or a late one after it, does not reach here), so is this."""
    if reported.delivery is None:
        return
    conn.execute(
        "UPDATE runs SET delivery = %s, patch_fallback_reason = %s WHERE id = %s",
        [reported.delivery, reported.patch_fallback_reason, run_id],
    )
    if reported.patch_fallback_reason is not None:
        conn.execute(
            "UPDATE patch_fallback_counts SET n = n + 1 WHERE reason = %s",
            [reported.patch_fallback_reason],
        )


def _true_reason(conn: Connection, lease: dict[str, Any], reported: Outcome) -> str | None:
    """The reported reason, or `platform_unavailable` for a download that failed through the
    window while the control plane itself was down at some time between the grant and the
    window's end (see the module's docstring)."""
    if reported.status != "failed" or reported.reason != OutcomeReason.DOWNLOAD_FAILED:
        return reported.reason
    closes, granted = window_closes_at(lease), lease["granted_at"]
    if closes is None or granted is None or granted >= closes:
        return reported.reason
    if read_coverage(conn, since=granted, until=closes).was_down(granted, closes):
        return OutcomeReason.PLATFORM_UNAVAILABLE.value
    return reported.reason
