"""A release this host rolled back is "nothing to do" for it (issue 13 §6).

Without this a host that rolled release N back claimed a token for N at every later slot and
failed again — each time one of its organisation's tokens of the minute. Now a scheduled claim
whose offered release (the pair's current one) this agent has a `rolled_back` run for is refused
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
from control_plane.events.services import record_event
from control_plane.types import Connection
from ground.contract import RefusalCode, ReleaseTrack

__all__ = ["refuse_rolled_back_release", "rolled_back_release"]

_ROLLED_BACK = """
SELECT rel.id, rel.agent_version, back.id AS rolled_back_run
  FROM current_releases cur
  JOIN releases rel ON rel.id = cur.release_id
  JOIN agents a ON a.id = %(agent)s
  JOIN LATERAL (
        SELECT r.id FROM runs r
         WHERE r.agent_id = a.id AND r.release_id = rel.id AND r.status = 'rolled_back'
           AND (a.release_retry_at IS NULL OR r.finished_at > a.release_retry_at)
         ORDER BY r.finished_at DESC LIMIT 1
       ) back ON true
 WHERE cur.channel = %(channel)s AND cur.platform = %(platform)s
"""


def rolled_back_release(
    conn: Connection, agent_id: UUID, track: ReleaseTrack
) -> dict[str, Any] | None:
    """The pair's current release when this agent rolled it back since the last retry, else
    None."""
    row: dict[str, Any] | None = conn.execute(
        _ROLLED_BACK, {"agent": agent_id, "channel": track.channel, "platform": track.platform}
    ).fetchone()
    return row


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
) -> None:
    """Raise `RELEASE_ROLLED_BACK` (after consuming the slot with a `skipped` run and its
    event) when the offered release is one this agent rolled back; else return."""
    release = rolled_back_release(conn, agent_id, track)
    if release is None:
        return
    reason = RefusalCode.RELEASE_ROLLED_BACK
    with conn.transaction():
        run = conn.execute(
            "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, skip_reason,"
            " release_id, from_version, version, created_at, finished_at)"
            " VALUES (%s, %s, 'schedule', %s, %s, 'skipped', %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (agent_id, slot_key) WHERE trigger = 'schedule' DO NOTHING"
            " RETURNING id",
            [
                agent_id,
                org_id,
                slot_key,
                slot_at,
                reason.value,
                release["id"],
                from_version,
                from_version,
                now,
                now,
            ],
        ).fetchone()
        if run is not None:
            record_event(
                conn,
                org_id=org_id,
                agent_id=agent_id,
                run_id=run["id"],
                kind="update.skipped",
                actor_kind="schedule",
                at=now,
                data={
                    "slot_key": slot_key,
                    "reason": reason.value,
                    "release_version": release["agent_version"],
                    "rolled_back_run": str(release["rolled_back_run"]),
                },
            )
    raise ClaimRefused(
        reason,
        f"this host rolled release {release['agent_version']} back "
        f"(run {release['rolled_back_run']}): nothing to do until a newer release is published "
        "for its channel and platform, or an operator asks for a retry",
        slot_key=slot_key,
    )
