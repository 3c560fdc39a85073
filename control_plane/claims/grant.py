"""The grant: the transaction that turns a claim with room into a throttle token, and the
answer a claimed run gives every time it is asked (`claim_grant`).

`grant_token` runs its steps in one transaction: read the brake and the release offered (locked
against a withdrawal or a halt), open the round's counters, write the run and its token, record
the event, read the answer, and count the grant in both caps last (`claims.caps`: held exactly
there, under the counters' row locks). `ClaimService` decides whether a claim gets this far.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg

from control_plane.claims.caps import (
    CAP_FULL_SQLSTATE,
    Caps,
    RoundCounts,
    cap_full_refusal,
    count_grant,
    open_round_counters,
    round_start,
)
from control_plane.claims.refused import brake_on, no_release
from control_plane.events.services import record_event
from control_plane.releases.products import Product
from control_plane.releases.services import claim_release_view, current_release
from control_plane.rollout.gate import release_for_grant
from control_plane.types import Connection
from ground.contract import ClaimGrant, ReleaseTrack, TokenView

__all__ = ["TOKEN_LIFETIME", "Claim", "Granted", "ScheduledGrant", "claim_grant", "grant_token"]

# How long a granted token lets its run download: long enough for a slow uplink, short enough
# that a lost agent does not hold a lease for the night.
TOKEN_LIFETIME = timedelta(minutes=60)


@dataclass(frozen=True, kw_only=True)
class Claim:
    """A granted claim: `created` is false when the same claim was asked again."""

    created: bool
    grant: ClaimGrant


_GRANT_VIEW = (
    "SELECT r.id AS run_id, r.slot_key, t.id AS token_id, t.expires_at,"
    " rel.agent_version, rel.manifest_version, rel.manifest, rel.signature, rel.product"
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
        product=row["product"],
    )


@dataclass(frozen=True, kw_only=True)
class ScheduledGrant:
    """What a scheduled slot's grant is for: a claim that saw room in the caps."""

    agent_id: UUID
    org_id: UUID
    slot_key: str
    slot_at: datetime
    from_version: str | None
    existing_run: UUID | None  # a claimed run whose token is renewed (a new lease)
    caps: Caps
    track: ReleaseTrack
    now: datetime
    # The managed agent's release, or nachtwacht's own agent's (`releases.products`).
    product: Product = "agent"


@dataclass(frozen=True, kw_only=True)
class Granted:
    """A committed grant, and the round's counts it left (true for the rest of the round)."""

    grant: ClaimGrant
    counts: RoundCounts


def grant_token(conn: Connection, claim: ScheduledGrant) -> Granted:
    """The grant transaction: a new run and its token (or, for `claim.existing_run`, a new lease
    of its token), counted in both caps. Raises the cap's refusal when one is full, the brake's
    or the pair's when either stops it, and `UniqueViolation` when the agent raced itself."""
    current_round = round_start(claim.now)
    # One transaction in pipeline mode: a statement whose answer the grant does not need
    # before the next one is sent with it (~14 statements in ~6 round trips), and the
    # COMMIT goes out with the counters' statement: the round's counter rows, which queue
    # the round's grants behind each other, are held for no round trip of this client's.
    # BEGIN and COMMIT are sent as statements (the pool's connections are in autocommit
    # mode): `conn.transaction()` would sync the pipeline before its COMMIT.
    try:
        with conn.pipeline():
            conn.execute("BEGIN")
            release = _release_to_grant(conn, claim)
            # The counter rows exist before anything else is written; their row locks are
            # taken last (`count_grant`), so a round's grants queue behind each other only
            # for the counting and the commit, not for every insert of the grant.
            open_round_counters(conn, current_round, claim.org_id)
            run_id = _write_run_and_token(conn, claim, release, current_round)
            _record_grant_event(conn, claim, run_id, release)
            # The answer, read in the transaction: after the commit the grant's thread has
            # nothing left to wait for (each wait for the database is a wait for the GIL too,
            # while the event loop refuses the rest of the round).
            answer = conn.execute(_GRANT_VIEW, [run_id])
            counting = count_grant(conn, current_round, claim.org_id, claim.caps)
            # Never prepared: after a failed statement the rest of the pipeline is skipped,
            # and a statement the driver chose to prepare there it would take for prepared on
            # the server. The COMMIT is the one statement sent behind the counting, which
            # fails when a cap is full (the COMMIT then is a rollback of everything above).
            conn.execute("COMMIT", prepare=False)
            counted = counting.fetchone()
            assert counted is not None
            grant = _grant_view(answer.fetchone())
    except psycopg.Error as failed:
        _abandon(conn, failed)
        refusal = cap_full_refusal(failed, claim.caps, claim.now)
        if refusal is not None:
            raise refusal from None
        raise
    except BaseException:
        _abandon(conn, None)
        raise
    return Granted(
        grant=grant,
        counts=RoundCounts(
            org_granted=counted["org_granted"], global_granted=counted["global_granted"]
        ),
    )


def _release_to_grant(conn: Connection, claim: ScheduledGrant) -> dict[str, Any]:
    """The release this claim is granted, locked; raises the brake's or the pair's refusal."""
    # Shared lock: grants do not wait for each other, but the brake's UPDATE waits for grants
    # in flight, and a grant after the brake sees it engaged.
    brake_read = conn.execute("SELECT engaged, reason FROM platform_brake FOR SHARE")
    # FOR SHARE of the pair's pointer: a withdrawal waits for this grant, then revokes its
    # token with the others.
    current_release(
        conn, claim.track.channel, claim.track.platform, for_grant=True, product=claim.product
    )
    brake = brake_read.fetchone()
    assert brake is not None
    if brake["engaged"]:
        raise brake_on(brake["reason"])
    # The pair's pointer stays locked; the agent's offer (its pin, or the release at the stage
    # the agent is in) is what it is granted, its row locked against a halt.
    release = release_for_grant(
        conn,
        agent_id=claim.agent_id,
        org_id=claim.org_id,
        track=claim.track,
        product=claim.product,
    )
    if release is None:
        raise no_release(claim.track)
    return release


def _write_run_and_token(
    conn: Connection, claim: ScheduledGrant, release: dict[str, Any], current_round: datetime
) -> UUID:
    """The claimed run and its token (or the existing run's token, renewed); the run's id."""
    now = claim.now
    if claim.existing_run is not None:
        conn.execute(
            "UPDATE runs SET release_id = %s, claimed_at = %s WHERE id = %s",
            [release["id"], now, claim.existing_run],
        )
        conn.execute(
            "UPDATE tokens SET id = gen_random_uuid(), release_id = %s,"
            " round_start = %s, granted_at = %s, expires_at = %s, revoked_at = NULL,"
            " revoked_reason = NULL WHERE run_id = %s",
            [release["id"], current_round, now, now + TOKEN_LIFETIME, claim.existing_run],
        )
        return claim.existing_run
    run = conn.execute(
        "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status,"
        " release_id, from_version, created_at, claimed_at) VALUES"
        " (%s, %s, 'schedule', %s, %s, 'claimed', %s, %s, %s, %s) RETURNING id",
        [
            claim.agent_id,
            claim.org_id,
            claim.slot_key,
            claim.slot_at,
            release["id"],
            claim.from_version,
            now,
            now,
        ],
    ).fetchone()
    assert run is not None
    run_id: UUID = run["id"]
    conn.execute(
        "INSERT INTO tokens (run_id, agent_id, release_id, round_start, granted_at,"
        " expires_at) VALUES (%s, %s, %s, %s, %s, %s)",
        [run_id, claim.agent_id, release["id"], current_round, now, now + TOKEN_LIFETIME],
    )
    return run_id


def _record_grant_event(
    conn: Connection, claim: ScheduledGrant, run_id: UUID, release: dict[str, Any]
) -> None:
    record_event(
        conn,
        org_id=claim.org_id,
        agent_id=claim.agent_id,
        run_id=run_id,
        kind="update.scheduled",
        actor_kind="schedule",
        at=claim.now,
        data={
            "slot_key": claim.slot_key,
            "from_version": claim.from_version,
            "to_version": release["agent_version"],
            "renewed": claim.existing_run is not None,
            "product": claim.product,
        },
    )


def _abandon(conn: Connection, failed: psycopg.Error | None) -> None:
    """End a grant that did not commit: roll back, and close a connection whose pipeline may
    have skipped statements."""
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        # A broken connection cannot roll back (the pool discards it): the error that broke
        # the grant is the one to raise.
        with contextlib.suppress(psycopg.Error):
            conn.execute("ROLLBACK")
    if (
        failed is not None
        and failed.sqlstate != CAP_FULL_SQLSTATE
        and not isinstance(failed, psycopg.errors.UniqueViolation)
    ):
        # Statements queued behind the failed one were skipped (see above). A full cap and a
        # run's UniqueViolation are read at once, with nothing queued behind them but the
        # COMMIT, and the caller reads the winner's claim on this same connection.
        conn.close()
