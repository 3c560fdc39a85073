"""The token for a manual update requested in the panel (docs/control_plane.md, "Manual
updates")."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from control_plane.claims.grant import TOKEN_LIFETIME, Claim, claim_grant
from control_plane.claims.refused import no_release
from control_plane.errors import ClaimRefused
from control_plane.events.services import record_event
from control_plane.releases.services import current_release
from control_plane.rollout.gate import check_manual_claim
from control_plane.types import Pool
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
    """The token for a manual update requested in the panel: no slot, no caps; the brake or a
    halt of its release refuses it unless an operator forced it (`rollout.gate`)."""
    with pool.connection() as conn, conn.transaction():
        run = conn.execute(
            "SELECT r.id, r.org_id, r.status, r.requested_by,"
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
        release = current_release(conn, track.channel, track.platform, for_grant=True)
        if release is None:
            raise no_release(track)
        check_manual_claim(conn, run_id=run["id"], release=release, track=track)
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
        record_event(
            conn,
            org_id=run["org_id"],
            agent_id=agent_id,
            run_id=run["id"],
            kind="update.started",
            actor_kind="user",
            actor_id=run["requested_by"],
            at=now,
            data={"from_version": from_version, "to_version": release["agent_version"]},
        )
        return Claim(created=run["status"] == "requested", grant=claim_grant(conn, run["id"]))
