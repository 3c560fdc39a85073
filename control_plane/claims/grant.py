"""The grant: the transaction that turns a claim with room into a throttle token, and the
answer a claimed run gives every time it is asked (`claim_grant`).

The caps are held here, exactly: the round's counters are incremented under their row locks
with `granted < cap` in the same statement (`count_claim_grant`, migration 0012), whatever
number of requests and replicas race. `ClaimService` decides whether a claim gets this far.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg

from control_plane.answers_cache import AnswerMemory
from control_plane.claims.refused import brake_on, global_cap_full, no_release, org_cap_full
from control_plane.claims.slots import round_start
from control_plane.events.services import record_event
from control_plane.releases.services import claim_release_view, current_release
from control_plane.rollout.gate import release_for_grant
from control_plane.types import Connection
from ground.contract import ClaimGrant, ReleaseTrack, TokenView

__all__ = ["TOKEN_LIFETIME", "Claim", "claim_grant", "grant_token"]

# How long a granted token lets its run download: long enough for a slow uplink, short enough
# that a lost agent does not hold a lease for the night.
TOKEN_LIFETIME = timedelta(minutes=60)

# A round's two counter rows, created when missing, in one statement. Only when missing: an
# INSERT … ON CONFLICT that meets a row another grant has updated waits for that grant's commit
# (the row might be gone by then), which queued every grant of a round from here on.
_COUNTER_ROWS = """
WITH org AS (
  INSERT INTO claim_rounds_org (round_start, org_id)
  SELECT %(round)s, %(org)s WHERE NOT EXISTS (
    SELECT FROM claim_rounds_org WHERE round_start = %(round)s AND org_id = %(org)s)
  ON CONFLICT DO NOTHING)
INSERT INTO claim_rounds_global (round_start)
SELECT %(round)s WHERE NOT EXISTS (SELECT FROM claim_rounds_global WHERE round_start = %(round)s)
ON CONFLICT DO NOTHING
"""
# A grant counted in both caps (migration 0012): the organisation's counter, then the platform's,
# each `granted < cap` under its row lock; a full cap fails the statement with NW429 and the
# message naming it, so the COMMIT sent with it becomes a rollback.
_COUNT_GRANT = (
    "SELECT org_granted, global_granted"
    " FROM count_claim_grant(%(round)s, %(org)s, %(org_cap)s, %(cap)s)"
)
_CAP_FULL = "NW429"


@dataclass(frozen=True, kw_only=True)
class Claim:
    """A granted claim: `created` is false when the same claim was asked again."""

    created: bool
    grant: ClaimGrant


_GRANT_VIEW = (
    "SELECT r.id AS run_id, r.slot_key, t.id AS token_id, t.expires_at,"
    " rel.agent_version, rel.manifest_version, rel.manifest, rel.signature"
    " FROM runs r JOIN tokens t ON t.run_id = r.id JOIN releases rel ON rel.id = t.release_id"
    " WHERE r.id = %s"
)


def claim_grant(conn: Connection, run_id: UUID) -> ClaimGrant:
    """The claim response for a run that holds a token (the same answer every time it is asked)."""
    return _grant_view(conn.execute(_GRANT_VIEW, [run_id]).fetchone())


def _grant_view(row: dict[str, Any] | None) -> ClaimGrant:
    assert row is not None, "a claimed run has its token"
    return ClaimGrant(
        run_id=row["run_id"],
        slot_key=row["slot_key"],
        token=TokenView(id=row["token_id"], expires_at=row["expires_at"]),
        release=claim_release_view(row, row["run_id"]),
    )


def grant_token(
    conn: Connection,
    memory: AnswerMemory,
    *,
    agent_id: UUID,
    org_id: UUID,
    slot_key: str,
    slot_at: datetime,
    from_version: str | None,
    existing_run: UUID | None,
    caps: tuple[int, int],
    track: ReleaseTrack,
    now: datetime,
) -> ClaimGrant:
    """The grant transaction of a claim that saw room: a new run and its token (or, for
    `existing_run`, a new lease of its token), counted in both caps under their row locks.
    Raises the cap's refusal when one is full (and remembers it full for the round), the brake's
    or the pair's when either stops it, and `UniqueViolation` when the agent raced itself."""
    org_cap, global_cap = caps
    current_round = round_start(now)
    # One transaction in pipeline mode: a statement whose answer the grant does not need
    # before the next one is sent with it (~14 statements in ~6 round trips), and the
    # COMMIT goes out with the counters' statement: the round's counter rows, which queue
    # the round's grants behind each other, are held for no round trip of this client's.
    # The statements, their order and their locks are those of one transaction as ever.
    # BEGIN and COMMIT are sent as statements (the pool's connections are in autocommit
    # mode): `conn.transaction()` would sync the pipeline before its COMMIT.
    # Its statements are prepared like any other (after five uses: parsing and planning
    # them was ~40 % of the server's work per grant), but a statement that a failed one
    # before it aborts is never run, and one the driver chose to prepare there it would
    # take for prepared on the server. So the COMMIT, the one statement sent behind the
    # counters' call that fails when a cap is full, is never prepared; and after any other
    # failure of the database's the connection is closed, for the pool to replace.
    try:
        with conn.pipeline():
            conn.execute("BEGIN")
            # Shared lock: grants do not wait for each other, but the brake's UPDATE waits for
            # grants in flight, and a grant after the brake sees it engaged.
            brake_read = conn.execute("SELECT engaged, reason FROM platform_brake FOR SHARE")
            # FOR SHARE of the pair's pointer: a withdrawal waits for this grant, then revokes
            # its token with the others.
            release = current_release(conn, track.channel, track.platform, for_grant=True)
            brake = brake_read.fetchone()
            assert brake is not None
            if brake["engaged"]:
                raise brake_on(brake["reason"])
            # The pair's pointer stays locked; the agent's offer (its pin, or the release at the
            # stage the agent is in) is what it is granted, its row locked against a halt.
            release = release_for_grant(conn, agent_id=agent_id, org_id=org_id, track=track)
            if release is None:
                raise no_release(track)
            # The round's counter rows exist before anything else is written; their row locks
            # are taken last (below), so the grants of a round queue behind each other only for
            # the counters' UPDATE and the commit, not for every insert of the grant.
            conn.execute(_COUNTER_ROWS, {"round": current_round, "org": org_id})
            if existing_run is None:
                run = conn.execute(
                    "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status,"
                    " release_id, from_version, created_at, claimed_at) VALUES"
                    " (%s, %s, 'schedule', %s, %s, 'claimed', %s, %s, %s, %s) RETURNING id",
                    [
                        agent_id,
                        org_id,
                        slot_key,
                        slot_at,
                        release["id"],
                        from_version,
                        now,
                        now,
                    ],
                ).fetchone()
                assert run is not None
                run_id: UUID = run["id"]
                conn.execute(
                    "INSERT INTO tokens (run_id, agent_id, release_id, round_start, granted_at,"
                    " expires_at) VALUES (%s, %s, %s, %s, %s, %s)",
                    [run_id, agent_id, release["id"], current_round, now, now + TOKEN_LIFETIME],
                )
            else:
                run_id = existing_run
                conn.execute(
                    "UPDATE runs SET release_id = %s, claimed_at = %s WHERE id = %s",
                    [release["id"], now, run_id],
                )
                conn.execute(
                    "UPDATE tokens SET id = gen_random_uuid(), release_id = %s,"
                    " round_start = %s, granted_at = %s, expires_at = %s, revoked_at = NULL,"
                    " revoked_reason = NULL WHERE run_id = %s",
                    [release["id"], current_round, now, now + TOKEN_LIFETIME, run_id],
                )
            record_event(
                conn,
                org_id=org_id,
                agent_id=agent_id,
                run_id=run_id,
                kind="update.scheduled",
                actor_kind="schedule",
                at=now,
                data={
                    "slot_key": slot_key,
                    "from_version": from_version,
                    "to_version": release["agent_version"],
                    "renewed": existing_run is not None,
                },
            )
            # The answer, read in the transaction: after the commit the grant's thread has
            # nothing left to wait for (each wait for the database is a wait for the GIL too,
            # while the event loop refuses the rest of the round).
            answer = conn.execute(_GRANT_VIEW, [run_id])

            # The caps, exactly: `granted < cap` in each UPDATE, under the counter's row
            # lock, the organisation's first (the platform's is not touched when the
            # organisation's found no room). A full cap fails the statement, and the COMMIT
            # after it is a rollback of everything above.
            counting = conn.execute(
                _COUNT_GRANT,
                {"round": current_round, "org": org_id, "org_cap": org_cap, "cap": global_cap},
            )
            conn.execute("COMMIT", prepare=False)
            counted = counting.fetchone()
            assert counted is not None
            grant = _grant_view(answer.fetchone())
    except BaseException as failed:
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            # A broken connection cannot roll back (the pool discards it): the error that
            # broke the grant is the one to raise.
            with contextlib.suppress(psycopg.Error):
                conn.execute("ROLLBACK")
        if isinstance(failed, psycopg.Error) and failed.sqlstate == _CAP_FULL:
            # Full, as committed by other grants: full until the round ends (it never
            # un-fills), so this worker refuses the rest of the round from memory.
            if failed.diag.message_primary == "org_cap":
                memory.note_granted(current_round, org_id, org_cap)
                raise org_cap_full(now, org_cap) from None
            memory.note_granted(current_round, None, global_cap)
            raise global_cap_full(now, global_cap) from None
        if isinstance(failed, psycopg.Error) and not isinstance(
            failed, psycopg.errors.UniqueViolation
        ):
            # Statements queued behind the failed one were skipped (see above). A run's
            # UniqueViolation is read at once, with nothing queued behind it, and the
            # caller reads the winner's claim on this same connection.
            conn.close()
        raise
    # Committed: the counts this grant left are true for the rest of the round.
    memory.note_granted(current_round, org_id, counted["org_granted"])
    memory.note_granted(current_round, None, counted["global_granted"])
    return grant
