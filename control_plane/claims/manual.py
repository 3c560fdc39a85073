"""The token for a manual update ("update now", in the panel or on the host).

A manual update has no slot and no caps, but it is offered what a scheduled claim of the same
agent would be (`rollout.offer`: its pin, the stage it is in, never a withdrawn release), and the
same stops refuse it: the platform's brake, a hold, a halt or the release's own brake. An
operator's force (`forced_updates`) is the only way past them, and the grant's event says it was
forced, by whom and why.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from control_plane.claims.grant import TOKEN_LIFETIME, Claim, claim_grant
from control_plane.claims.refused import no_release, nothing_pinned
from control_plane.errors import ClaimRefused
from control_plane.events.services import record_event
from control_plane.rollout.gate import ManualRelease, release_for_manual
from control_plane.types import Connection, Pool
from ground.contract import DEFAULT_TRACK, RefusalCode, ReleaseTrack

__all__ = ["claim_manual"]


def claim_manual(
    pool: Pool,
    agent_id: UUID,
    manual_run_id: UUID,
    from_version: str | None,
    now: datetime,
    *,
    track: ReleaseTrack = DEFAULT_TRACK,
) -> Claim:
    """The token for a manual update: no slot, no caps; the agent's offer, refused by the same
    stops as a scheduled claim unless an operator forced it (see the module's docstring)."""
    with pool.connection() as conn, conn.transaction():
        run = conn.execute(
            "SELECT r.id, r.org_id, r.status, r.requested_by, r.agent_id,"
            " (t.revoked_at IS NULL AND t.expires_at > %s) AS token_usable"
            " FROM runs r LEFT JOIN tokens t ON t.run_id = r.id"
            " WHERE r.id = %s AND r.agent_id = %s AND r.trigger = 'manual' FOR UPDATE OF r",
            [now, manual_run_id, agent_id],
        ).fetchone()
        if run is None:
            raise ClaimRefused(
                RefusalCode.RUN_NOT_FOUND,
                f"manual_run_id: {str(manual_run_id)!r} is not a manual update of this agent",
            )
        if run["status"] == "claimed" and run["token_usable"]:
            return Claim(created=False, grant=claim_grant(conn, run["id"]))
        if run["status"] not in {"requested", "claimed"}:
            raise ClaimRefused(
                RefusalCode.RUN_FINISHED,
                f"manual update {manual_run_id} already ended ({run['status']})",
            )
        granted = release_for_manual(
            conn, run_id=run["id"], agent_id=agent_id, org_id=run["org_id"], track=track, now=now
        )
        release = granted.release
        if release is None:
            raise nothing_pinned(track) if granted.basis == "pinned" else no_release(track)
        conn.execute(
            "UPDATE runs SET status = 'claimed', claimed_at = %s, release_id = %s,"
            " from_version = %s WHERE id = %s",
            [now, release["id"], from_version, run["id"]],
        )
        conn.execute(
            "INSERT INTO tokens (run_id, agent_id, release_id, granted_at, expires_at)"
            " VALUES (%s, %s, %s, %s, %s)"
            " ON CONFLICT (run_id) DO UPDATE SET id = gen_random_uuid(),"
            " release_id = EXCLUDED.release_id, granted_at = EXCLUDED.granted_at,"
            " expires_at = EXCLUDED.expires_at, revoked_at = NULL, revoked_reason = NULL",
            [run["id"], agent_id, release["id"], now, now + TOKEN_LIFETIME],
        )
        _record_started(conn, run, granted, release, from_version, now)
        return Claim(created=run["status"] == "requested", grant=claim_grant(conn, run["id"]))


def _record_started(
    conn: Connection,
    run: dict[str, Any],
    granted: ManualRelease,
    release: dict[str, Any],
    from_version: str | None,
    now: datetime,
) -> None:
    """The grant's event: a forced update is the operator's act (named, with the reason), never
    the person who clicked, so the trail shows who let it past the stops."""
    forced = granted.forced
    data: dict[str, Any] = {
        "from_version": from_version,
        "to_version": release["agent_version"],
        "offer": granted.basis,
        "forced": forced is not None,
    }
    if forced is not None:
        data["forced_reason"] = forced.reason
    record_event(
        conn,
        org_id=run["org_id"],
        agent_id=run["agent_id"],
        run_id=run["id"],
        kind="update.started",
        actor_kind="user" if forced is None else "operator",
        actor_id=run["requested_by"] if forced is None else None,
        actor_name=None if forced is None else forced.operator,
        at=now,
        data=data,
    )
