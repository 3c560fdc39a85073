"""What the control plane authorised a claimed run to do, and until when.

Revocation is honoured up to the swap: the agent asks `confirm_path(run_id)` immediately before it
switches, and an outcome that records a switch (`succeeded`, `rolled_back`) is judged against the
same lease — the run's token (revoked? expired?) and, for a scheduled run, the slot's catch-up
window on the control plane's clock. A switch outside that lease is recorded as `unauthorised`,
never as a success.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from control_plane.errors import Conflict, Forbidden, NotFound
from control_plane.types import Connection
from ground.contract import AnswerCode, RefusalCode, SwapPermit, TokenView, format_instant
from shared_planner import Slot, parse_slot_key

__all__ = [
    "SWITCH_OUTCOMES",
    "lease_refusal",
    "read_lease",
    "swap_permit",
    "unauthorised_switch",
    "window_closes_at",
]

# The outcomes that say the agent switched to the new version (and, for `rolled_back`, back).
SWITCH_OUTCOMES = frozenset({"succeeded", "rolled_back"})

_LEASE = """
SELECT r.id, r.org_id, r.trigger, r.status, r.slot_key, r.slot_at, r.requested_by, r.created_at,
       r.outcome_inferred, t.id AS token_id, t.granted_at, t.expires_at, t.revoked_at,
       t.revoked_reason, s.catch_up_minutes,
       coalesce((SELECT rel.product FROM releases rel WHERE rel.id = r.release_id), 'agent')
       AS product
  FROM runs r
  LEFT JOIN tokens t ON t.run_id = r.id
 CROSS JOIN platform_settings s
 WHERE r.id = %s AND r.agent_id = %s
"""


def read_lease(
    conn: Connection, agent_id: UUID, run_id: UUID, *, for_update: bool = False
) -> dict[str, Any]:
    """The run with its token and the window setting, or 404 `run_not_found`."""
    row: dict[str, Any] | None = conn.execute(
        _LEASE + (" FOR UPDATE OF r" if for_update else ""), [run_id, agent_id]
    ).fetchone()
    if row is None:
        raise NotFound(f"run {run_id} is not a run of this agent", code=AnswerCode.RUN_NOT_FOUND)
    return row


def window_closes_at(lease: dict[str, Any]) -> datetime | None:
    """The end of a scheduled run's catch-up window; None for a manual run (no window)."""
    if lease["trigger"] != "schedule" or lease["slot_at"] is None:
        return None
    day, wall = parse_slot_key(lease["slot_key"])
    slot = Slot(key=lease["slot_key"], day=day, wall=wall, at=lease["slot_at"])
    return slot.window_closes(timedelta(minutes=lease["catch_up_minutes"]))


def unauthorised_switch(
    lease: dict[str, Any], at: datetime, *, asked_now: bool = False
) -> str | None:
    """Why a switch at `at` was not authorised by the lease (`token_revoked`, `token_expired`,
    `window_closed`), or None when it was.

    A reported switch is judged at its own instant: one made before the revocation was covered.
    A switch `asked_now` (the permit) is refused by any recorded revocation, whatever its stamp:
    the stamp is the revoking host's clock, and a replica whose clock is behind it would otherwise
    honour the token for as long as the two clocks differ."""
    if lease["token_id"] is None:
        return AnswerCode.TOKEN_REVOKED.value
    if lease["revoked_at"] is not None and (asked_now or at >= lease["revoked_at"]):
        return AnswerCode.TOKEN_REVOKED.value
    if at >= lease["expires_at"]:
        return AnswerCode.TOKEN_EXPIRED.value
    closes = window_closes_at(lease)
    if closes is not None and at >= closes:
        return RefusalCode.WINDOW_CLOSED.value
    return None


def lease_refusal(lease: dict[str, Any], at: datetime, *, asked_now: bool = False) -> str:
    """The words for a refused switch: which run, what ended its lease and when."""
    why = unauthorised_switch(lease, at, asked_now=asked_now)
    run_id = lease["id"]
    if why == AnswerCode.TOKEN_REVOKED.value:
        if lease["revoked_at"] is None:
            return f"run {run_id} holds no token"
        reason = lease["revoked_reason"] or "operator"
        return (
            f"the token of run {run_id} was revoked ({reason}) at "
            f"{format_instant(lease['revoked_at'])}"
        )
    if why == AnswerCode.TOKEN_EXPIRED.value:
        return f"the token of run {run_id} expired at {format_instant(lease['expires_at'])}"
    closes = window_closes_at(lease)
    assert closes is not None
    return f"the window of slot {lease['slot_key']!r} closed at {format_instant(closes)}"


def swap_permit(lease: dict[str, Any], now: datetime) -> SwapPermit:
    """The permit to switch now, or the refusal: 409 `run_finished` for a run no longer claimed,
    403 `token_revoked` / `token_expired`, 409 `window_closed`."""
    run_id = lease["id"]
    if lease["status"] != "claimed":
        raise Conflict(
            f"run {run_id} already ended ({lease['status']})", code=RefusalCode.RUN_FINISHED.value
        )
    why = unauthorised_switch(lease, now, asked_now=True)
    if why in {AnswerCode.TOKEN_REVOKED.value, AnswerCode.TOKEN_EXPIRED.value}:
        raise Forbidden(lease_refusal(lease, now, asked_now=True), code=why)
    if why is not None:
        raise Conflict(lease_refusal(lease, now, asked_now=True), code=why)
    return SwapPermit(
        run_id=run_id,
        token=TokenView(id=lease["token_id"], expires_at=lease["expires_at"]),
        window_closes_at=window_closes_at(lease),
    )
