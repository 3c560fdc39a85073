"""The token for a manual update ("update now", in the panel or on the host).

A manual update has no slot, but it is offered what a scheduled claim of the same agent would be
(`rollout.offer`: its pin, the stage it is in, never a withdrawn release), and the same stops
refuse it: the platform's brake, a hold, a halt or the release's own brake. An operator's force
(`forced_updates`) is the only way past them, and the grant's event says it was forced, by whom
and why.

It goes through the caps too (`claims.caps`): "update now" on two thousand agents of one
customer would otherwise start two thousand downloads in one minute through that customer's
uplink. Its grant is counted in the round's two counters like a scheduled grant, and counts
against them; a full round refuses it with the same 429 `org_cap`/`global_cap` and retry hint,
and the agent claims it again at its next minute. Three grants stay outside the caps: the same
claim asked again (its token is still good), an operator's forced update, and the claim of an
agent older than `CAPPED_MANUAL_CONTRACT`, which ends a manual request on any refusal and tells
nobody — refused, its request would stay `requested` with no one to claim it.

A refusal by a cap writes nothing: it is found by one read without a lock before the grant's
transaction, or, when the round filled meanwhile, by the counting at the transaction's end,
which then rolls back everything it wrote. A manual update has no slot to miss, so no refusal
fact is kept for it either (`claims.refusals`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from control_plane.claims.caps import (
    Caps,
    RoundCounts,
    cap_full_refusal,
    cap_refusal,
    count_grant,
    open_round_counters,
    round_start,
)
from control_plane.claims.grant import TOKEN_LIFETIME, Claim, claim_grant
from control_plane.claims.refused import no_release, nothing_pinned
from control_plane.errors import ClaimRefused
from control_plane.events.services import record_event
from control_plane.rollout.gate import ManualRelease, release_for_manual
from control_plane.types import Connection, Pool
from ground.contract import DEFAULT_TRACK, RefusalCode, ReleaseTrack

__all__ = ["CAPPED_MANUAL_CONTRACT", "claim_manual"]

# The oldest agent contract whose agents wait and claim again when a cap refuses a manual
# update; older agents end the request on any refusal, so their claims stay outside the caps.
CAPPED_MANUAL_CONTRACT = 4

# The early refusal's one read, without a lock: is this claim one the caps judge (a pending
# request, or a claimed one whose token was revoked or ran out; not forced; nothing that stops
# it first), and the round's counts. The stops are answered by the grant's transaction, in
# their order, before the caps.
_ROUND_SEEN = """
SELECT (r.status = 'requested' OR (r.status = 'claimed'
          AND NOT coalesce(t.revoked_at IS NULL AND t.expires_at > %(now)s, false)))
         AND NOT EXISTS (SELECT FROM forced_updates f WHERE f.run_id = r.id)
         AND NOT b.engaged
         AND NOT EXISTS (SELECT FROM holds h WHERE h.agent_id = r.agent_id
                          AND h.until > %(now)s) AS capped,
       s.org_cap, s.global_cap,
       (SELECT o.granted FROM claim_rounds_org o
         WHERE o.round_start = %(round)s AND o.org_id = r.org_id) AS org_granted,
       (SELECT g.granted FROM claim_rounds_global g
         WHERE g.round_start = %(round)s) AS global_granted
  FROM runs r
 CROSS JOIN platform_settings s
 CROSS JOIN platform_brake b
  LEFT JOIN tokens t ON t.run_id = r.id
 WHERE r.id = %(run)s AND r.agent_id = %(agent)s AND r.trigger = 'manual'
"""


def claim_manual(
    pool: Pool,
    agent_id: UUID,
    manual_run_id: UUID,
    from_version: str | None,
    now: datetime,
    *,
    track: ReleaseTrack = DEFAULT_TRACK,
    through_caps: bool = True,
) -> Claim:
    """The token for a manual update: no slot; the agent's offer, refused by the same stops as
    a scheduled claim and counted in the caps unless an operator forced it (see the module's
    docstring). `through_caps` false: the asking agent cannot wait for a full round."""
    if not through_caps:
        with pool.connection() as conn:
            return _claim(conn, agent_id, manual_run_id, from_version, now, track, None)
    with pool.connection() as conn:
        caps = _refuse_when_full(conn, agent_id, manual_run_id, now)
        try:
            return _claim(conn, agent_id, manual_run_id, from_version, now, track, caps)
        except psycopg.Error as failed:
            refusal = cap_full_refusal(failed, caps, now)
            if refusal is not None:
                raise refusal from None
            raise


def _refuse_when_full(conn: Connection, agent_id: UUID, manual_run_id: UUID, now: datetime) -> Caps:
    """The caps in force, or the refusal of a claim the caps judge in a round already full."""
    seen = conn.execute(
        _ROUND_SEEN,
        {"now": now, "round": round_start(now), "run": manual_run_id, "agent": agent_id},
    ).fetchone()
    if seen is None:  # no such run: the transaction answers `run_not_found`
        settings = conn.execute("SELECT org_cap, global_cap FROM platform_settings").fetchone()
        assert settings is not None
        return Caps(org_cap=settings["org_cap"], global_cap=settings["global_cap"])
    caps = Caps(org_cap=seen["org_cap"], global_cap=seen["global_cap"])
    if seen["capped"]:
        counts = RoundCounts(
            org_granted=seen["org_granted"] or 0, global_granted=seen["global_granted"] or 0
        )
        full = cap_refusal(caps, counts, now)
        if full is not None:
            raise full
    return caps


def _claim(
    conn: Connection,
    agent_id: UUID,
    manual_run_id: UUID,
    from_version: str | None,
    now: datetime,
    track: ReleaseTrack,
    caps: Caps | None,
) -> Claim:
    """The grant's transaction; counted in `caps` last, unless forced (None: not counted)."""
    with conn.transaction():
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
        counted = caps if granted.forced is None else None
        current_round = None if counted is None else round_start(now)
        if current_round is not None:
            open_round_counters(conn, current_round, run["org_id"])
        conn.execute(
            "UPDATE runs SET status = 'claimed', claimed_at = %s, release_id = %s,"
            " from_version = %s WHERE id = %s",
            [now, release["id"], from_version, run["id"]],
        )
        conn.execute(
            "INSERT INTO tokens (run_id, agent_id, release_id, round_start, granted_at,"
            " expires_at) VALUES (%s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (run_id) DO UPDATE SET id = gen_random_uuid(),"
            " release_id = EXCLUDED.release_id, round_start = EXCLUDED.round_start,"
            " granted_at = EXCLUDED.granted_at, expires_at = EXCLUDED.expires_at,"
            " revoked_at = NULL, revoked_reason = NULL",
            [run["id"], agent_id, release["id"], current_round, now, now + TOKEN_LIFETIME],
        )
        _record_started(conn, run, granted, release, from_version, now, counted is not None)
        answer = claim_grant(conn, run["id"])
        if counted is not None and current_round is not None:
            # Last, as in a scheduled grant: the counter rows' locks queue the round's grants,
            # so they are held only from here to the commit; a full cap fails this statement
            # and the transaction rolls back everything above.
            count_grant(conn, current_round, run["org_id"], counted).fetchone()
        return Claim(created=run["status"] == "requested", grant=answer)


def _record_started(
    conn: Connection,
    run: dict[str, Any],
    granted: ManualRelease,
    release: dict[str, Any],
    from_version: str | None,
    now: datetime,
    through_caps: bool,
) -> None:
    """The grant's event: a forced update is the operator's act (named, with the reason), never
    the person who clicked, so the trail shows who let it past the stops; `through_caps` says
    whether the grant was counted in the caps."""
    forced = granted.forced
    data: dict[str, Any] = {
        "from_version": from_version,
        "to_version": release["agent_version"],
        "offer": granted.basis,
        "forced": forced is not None,
        "through_caps": through_caps,
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
