"""A release this host rolled back is "nothing to do" for it.

Without this a host that rolled release N back claimed a token for N at every later slot and
failed again — each time one of its organisation's tokens of the minute. Now a scheduled claim
whose offered release (its pin, or the pair's release at the stage this agent is in —
`rollout.offer`) this agent has a `rolled_back` run for is refused
with `RefusalCode.RELEASE_ROLLED_BACK`: the slot is consumed by a `skipped` run (reason
`release_rolled_back`, so the agent page says so) and no token is taken. It ends by itself when a
newer release is current for the pair, or when an operator asks for a retry
(`request_retry`: rolled-back runs finished before that moment no longer count).

Checked only when the caps had room to grant, so the herd's refusal path pays nothing for it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from control_plane.errors import ClaimRefused
from control_plane.rollout.gate import record_skipped_slot
from control_plane.rollout.offer import Offer, offered_release
from control_plane.types import Connection
from ground.contract import RefusalCode, ReleaseTrack

__all__ = ["refuse_rolled_back_release", "rolled_back_release"]

_ROLLED_BACK = """
SELECT r.id AS rolled_back_run
  FROM runs r JOIN agents a ON a.id = r.agent_id
 WHERE r.agent_id = %(agent)s AND r.release_id = %(release)s AND r.status = 'rolled_back'
   AND (a.release_retry_at IS NULL OR r.finished_at > a.release_retry_at)
 ORDER BY r.finished_at DESC LIMIT 1
"""


def rolled_back_release(
    conn: Connection,
    agent_id: UUID,
    org_id: UUID,
    track: ReleaseTrack,
    *,
    offer: Offer | None = None,
) -> dict[str, Any] | None:
    """The release this agent is offered (`offer` when the caller has just read it) when it
    rolled that release back since the last retry (its id, `agent_version` and
    `rolled_back_run`), else None."""
    if offer is None:
        offer = offered_release(conn, agent_id=agent_id, org_id=org_id, track=track)
    offered = offer.release
    if offered is None:
        return None
    back = conn.execute(_ROLLED_BACK, {"agent": agent_id, "release": offered["id"]}).fetchone()
    if back is None:
        return None
    return {
        "id": offered["id"],
        "agent_version": offered["agent_version"],
        "rolled_back_run": back["rolled_back_run"],
    }


def refuse_rolled_back_release(
    conn: Connection,
    *,
    agent_id: UUID,
    org_id: UUID,
    slot_key: str,
    slot_at: datetime,
    from_version: str | None,
    track: ReleaseTrack,
    now: datetime,
    offer: Offer | None = None,
) -> None:
    """Raise `RELEASE_ROLLED_BACK` (after consuming the slot with a `skipped` run and its
    event) when the offered release is one this agent rolled back; else return."""
    release = rolled_back_release(conn, agent_id, org_id, track, offer=offer)
    if release is None:
        return
    reason = RefusalCode.RELEASE_ROLLED_BACK
    record_skipped_slot(
        conn,
        agent_id=agent_id,
        org_id=org_id,
        slot_key=slot_key,
        slot_at=slot_at,
        reason=reason,
        release=release,
        now=now,
        from_version=from_version,
        details={"rolled_back_run": str(release["rolled_back_run"])},
    )
    raise ClaimRefused(
        reason,
        f"this host rolled release {release['agent_version']} back "
        f"(run {release['rolled_back_run']}): nothing to do until a newer release is published "
        "for its channel and platform, or an operator asks for a retry",
        slot_key=slot_key,
    )
