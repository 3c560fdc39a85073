"""Throttle tokens: the claim of a slot, within the caps (DESIGN.md rules 8-10 and "Scale").

The refusal is the hot path — nearly every agent is at 03:00 and 25 a minute get through — so it
is one read-only statement: the agent, its schedule, the settings, the brake, its runs for the slot
and this round's two counters. Nothing is locked and nothing is written. Only a request that saw
room in both counters opens the grant transaction, where the counters are incremented under their
row locks with `granted < cap` in the UPDATE itself: whatever number of requests and replicas race,
a round never grants more than its caps.

Every refusal of a scheduled claim is handed to the `RefusalRecorder` here, whoever the caller:
the facts behind the miss reasons must not depend on which route asked.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg

from control_plane.accounts.services import AGENT_OF_CREDENTIAL
from control_plane.answers_cache import FACTS_ONLY, AnswerMemory, Changes, DatabaseNeeded
from control_plane.claims.in_flight import GrantsInFlight, KnownRoom
from control_plane.claims.refusals import RefusalRecorder
from control_plane.claims.rolled_back import refuse_rolled_back_release
from control_plane.claims.slots import checked_slot_of, retry_after_seconds, round_start
from control_plane.claims.warm_up import SlotWarmUp, facts_key
from control_plane.errors import ClaimRefused, NotFound
from control_plane.events.services import record_event
from control_plane.inputs import stored_text
from control_plane.releases.services import claim_release_view, current_release
from control_plane.rollout.gate import (
    check_manual_claim,
    check_scheduled_claim,
    release_for_grant,
)
from control_plane.settings.services import read_settings
from control_plane.types import Connection, Pool
from ground.contract import (
    DEFAULT_TRACK,
    AnswerCode,
    ClaimGrant,
    ClaimRequest,
    Instant,
    RefusalCode,
    ReleaseTrack,
    TokenView,
)
from ground.contract.messages import MAX_SLOT_KEY_LENGTH
from ground.limits import MAX_VERSION_LENGTH

__all__ = ["TOKEN_LIFETIME", "Claim", "ClaimService", "GrantHistory", "RoundGrants"]

# How long a granted token lets its run download: long enough for a slow uplink, short enough
# that a lost agent does not hold a lease for the night.
TOKEN_LIFETIME = timedelta(minutes=60)

_HOT_PATH = """
SELECT a.id AS agent_id, a.org_id,
       a.update_schedule_enabled AS enabled, a.update_schedule_times AS times,
       s.timezone, s.catch_up_minutes, s.org_cap, s.global_cap,
       b.engaged AS brake_engaged, b.reason AS brake_reason,
       (SELECT max(r.slot_at) FROM runs r
         WHERE r.agent_id = a.id AND r.trigger = 'schedule') AS last_consumed_at,
       existing.id AS existing_run_id, existing.status AS existing_status,
       existing.token_usable AS existing_token_usable,
       (SELECT g.granted FROM claim_rounds_global g
         WHERE g.round_start = %(round)s) AS global_granted,
       (SELECT o.granted FROM claim_rounds_org o
         WHERE o.round_start = %(round)s AND o.org_id = a.org_id) AS org_granted
  FROM agents a
 CROSS JOIN platform_settings s
 CROSS JOIN platform_brake b
  LEFT JOIN LATERAL (
        SELECT r.id, r.status,
               (t.revoked_at IS NULL AND t.expires_at > %(now)s) AS token_usable
          FROM runs r LEFT JOIN tokens t ON t.run_id = r.id
         WHERE r.agent_id = a.id AND r.trigger = 'schedule' AND r.slot_key = %(slot_key)s
       ) existing ON true
 WHERE a.id = {agent}
"""
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

_HOT_PATH_BY_ID = _HOT_PATH.format(agent="%(agent_id)s")
_HOT_PATH_BY_CREDENTIAL = _HOT_PATH.format(agent=f"({AGENT_OF_CREDENTIAL})")


@dataclass(frozen=True, kw_only=True)
class Claim:
    """A granted claim: `created` is false when the same claim was asked again."""

    created: bool
    grant: ClaimGrant


def _cap_full(code: RefusalCode, now: datetime, message: str) -> ClaimRefused:
    return ClaimRefused(
        code, message, reason=code.value, retry_after_seconds=retry_after_seconds(now)
    )


def _org_cap_full(now: datetime, org_cap: int) -> ClaimRefused:
    message = f"this organisation's {org_cap} updates for this minute are taken"
    return _cap_full(RefusalCode.ORG_CAP, now, message)


def _global_cap_full(now: datetime, global_cap: int) -> ClaimRefused:
    message = f"the platform's {global_cap} updates for this minute are taken"
    return _cap_full(RefusalCode.GLOBAL_CAP, now, message)


def _refuse_when_full(
    now: datetime, org_cap: int, global_cap: int, org_granted: int | None, granted: int | None
) -> None:
    """The caps' refusals, the organisation's first, for counts known to be at least these."""
    if (org_granted or 0) >= org_cap:
        raise _org_cap_full(now, org_cap)
    if (granted or 0) >= global_cap:
        raise _global_cap_full(now, global_cap)


def _brake(reason: str | None) -> ClaimRefused:
    why = f": {reason}" if reason else ""
    return ClaimRefused(
        RefusalCode.BRAKE,
        f"scheduled updates are stopped by the operators' brake{why}",
        reason=reason,
    )


def _slot_consumed(slot_key: str, why: str) -> ClaimRefused:
    return ClaimRefused(
        RefusalCode.SLOT_CONSUMED, f"slot_key: {slot_key!r} {why}", slot_key=slot_key
    )


def _no_release(track: ReleaseTrack) -> ClaimRefused:
    return ClaimRefused(
        RefusalCode.NO_RELEASE,
        f"no release is current for channel {track.channel!r} on platform {track.platform!r}",
    )


def _is_open(seen: dict[str, Any], slot_key: str, now: datetime) -> bool:
    """Whether `slot_key` is an open slot of the agent read (the slot check is memoized)."""
    try:
        checked_slot_of(seen, slot_key, now)
    except ClaimRefused:
        return False
    return True


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


@dataclass(frozen=True, kw_only=True)
class RoundGrants:
    round_start: Instant
    granted: int


@dataclass(frozen=True, kw_only=True)
class GrantHistory:
    rounds: tuple[RoundGrants, ...]
    # Today's cap: the caps in force at each past round are not kept, so a picture of an old
    # night compares it with the cap as it is now.
    global_cap: int


class ClaimService:
    def __init__(
        self, pool: Pool, refusals: RefusalRecorder, *, memory: AnswerMemory | None = None
    ) -> None:
        self._pool = pool
        self._refusals = refusals
        self._memory = memory or AnswerMemory()
        self._warm_up = SlotWarmUp(self._memory)
        # Used by the route, in the event loop: the claims let through to the database.
        self.grants_in_flight = GrantsInFlight()

    def grants_per_round(self, *, since: datetime, until: datetime) -> GrantHistory:
        """The platform's grants in each round that began in [since, until), oldest first (a
        round without a grant has no row), beside the platform's cap per round."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT round_start, granted FROM claim_rounds_global"
                " WHERE round_start >= %s AND round_start < %s AND granted > 0"
                " ORDER BY round_start",
                [since, until],
            ).fetchall()
            settings = read_settings(conn)
        return GrantHistory(
            rounds=tuple(
                RoundGrants(round_start=row["round_start"], granted=row["granted"]) for row in rows
            ),
            global_cap=settings.global_cap,
        )

    def claim(self, agent_id: UUID, request: ClaimRequest, now: datetime) -> Claim:
        """A scheduled slot's or a manual update's token (the request names exactly one)."""
        from_version = stored_text("from_version", request.from_version, MAX_VERSION_LENGTH)
        if request.manual_run_id is not None:
            return self.claim_manual(
                agent_id, request.manual_run_id, from_version, now, track=request.track
            )
        # Checked here too, not only at the API's door: the hot path's SELECT takes the key
        # before the planner has judged it.
        slot_key = stored_text("slot_key", request.slot_key, MAX_SLOT_KEY_LENGTH)
        assert slot_key is not None, "ClaimRequest names exactly one"
        return self.claim_slot(agent_id, slot_key, from_version, now, track=request.track)

    def claim_slot(
        self,
        agent_id: UUID,
        slot_key: str,
        from_version: str | None,
        now: datetime,
        *,
        track: ReleaseTrack = DEFAULT_TRACK,
    ) -> Claim:
        """Grant a token for a scheduled slot with the current release of `track`, or raise the
        refusal (and record it as a fact)."""
        claim = self._claim_slot(
            _HOT_PATH_BY_ID, {"agent_id": agent_id}, slot_key, from_version, now, track
        )
        if claim is None:
            raise NotFound(f"agent {agent_id} does not exist", code=AnswerCode.AGENT_NOT_FOUND)
        return claim

    def claim_slot_as(
        self,
        secret_sha256: str,
        slot_key: str,
        from_version: str | None,
        now: datetime,
        *,
        track: ReleaseTrack,
    ) -> Claim | None:
        """`claim_slot` for the agent behind a presented credential, found in the same statement
        (the refusal's one round trip); None when no agent has that valid credential."""
        checked = stored_text("from_version", from_version, MAX_VERSION_LENGTH)
        return self._claim_slot(
            _HOT_PATH_BY_CREDENTIAL,
            {"secret_sha256": secret_sha256},
            slot_key,
            checked,
            now,
            track,
        )

    def _claim_slot(
        self,
        statement: str,
        agent: dict[str, object],
        slot_key: str,
        from_version: str | None,
        now: datetime,
        track: ReleaseTrack,
    ) -> Claim | None:
        current_round = round_start(now)
        stamp = self._memory.stamp()  # before the read: a change applied meanwhile wins
        with self._pool.connection() as conn:
            # One autocommit SELECT: no transaction to open, no row lock, no write.
            seen = conn.execute(
                statement,
                {**agent, "slot_key": slot_key, "round": current_round, "now": now},
            ).fetchone()
            if seen is None:
                return None
            agent_id: UUID = seen["agent_id"]
            self._remember_facts(agent, slot_key, current_round, seen, stamp)
            if _is_open(seen, slot_key, now):
                # A real agent's open slot: the rest of the herd is about to ask about it too.
                self._warm_up.ask(conn, slot_key)
            # What this worker learnt since the read began (another request's grant that found
            # the round full): a round's count only grows, so the higher one is as true.
            seen = {
                **seen,
                "org_granted": self._at_least(current_round, seen["org_id"], seen["org_granted"]),
                "global_granted": self._at_least(current_round, None, seen["global_granted"]),
            }
            try:
                claim = self._decide(conn, seen, agent_id, slot_key, from_version, now, track)
            except ClaimRefused as refused:
                # Buffered in memory: the refusal path itself writes nothing.
                self._refusals.record(agent_id, slot_key, refused.refusal, now)
                raise
            # This worker's own grant is honoured by its memory at once (others: the feed).
            self._memory.apply(Changes(agents=frozenset({agent_id})))
            return claim

    def refuse_from_memory(
        self,
        secret_sha256: str,
        slot_key: str,
        from_version: str | None,
        now: datetime,
        *,
        track: ReleaseTrack,
    ) -> KnownRoom | None:
        """Raise (and record) the refusal that the remembered facts of this claim give, with
        `_decide` itself on the remembered row; when they give none (the memory not live, or the
        decision needs the database: then ask `claim_slot_as`), return the room this worker
        knows of in the claim's round — the caps less the highest counts seen — or None when it
        remembers nothing of the claim."""
        stored_text("from_version", from_version, MAX_VERSION_LENGTH)
        remembered = self._memory.recall(facts_key(secret_sha256, slot_key), now=now)
        if not isinstance(remembered, dict):
            return None
        current_round = round_start(now)
        seen = {
            **remembered,
            "org_granted": self._memory.granted(current_round, remembered["org_id"]),
            "global_granted": self._memory.granted(current_round, None),
        }
        agent_id: UUID = seen["agent_id"]
        try:
            self._decide(FACTS_ONLY, seen, agent_id, slot_key, from_version, now, track)
        except ClaimRefused as refused:
            self._refusals.record(agent_id, slot_key, refused.refusal, now)
            raise
        except DatabaseNeeded:
            pass
        return KnownRoom(
            round_start=current_round,
            org_id=seen["org_id"],
            org_room=seen["org_cap"] - (seen["org_granted"] or 0),
            global_room=seen["global_cap"] - (seen["global_granted"] or 0),
        )

    def _at_least(self, current_round: datetime, org_id: UUID | None, read: int | None) -> int:
        known = self._memory.granted(current_round, org_id)
        return max(read or 0, known or 0)

    def _remember_facts(
        self,
        agent: dict[str, object],
        slot_key: str,
        current_round: datetime,
        seen: dict[str, Any],
        stamp: int | None,
    ) -> None:
        """Keep the hot statement's row for `refuse_from_memory`: the round's counters apart
        (they only grow inside a round, whoever reads them), the rest under the credential.
        A row with a run for the slot is not kept: its token's validity depends on `now`."""
        self._memory.note_granted(current_round, seen["org_id"], seen["org_granted"] or 0)
        self._memory.note_granted(current_round, None, seen["global_granted"] or 0)
        secret_sha256 = agent.get("secret_sha256")
        if isinstance(secret_sha256, str) and seen["existing_run_id"] is None:
            self._memory.remember(
                facts_key(secret_sha256, slot_key),
                {
                    column: value
                    for column, value in seen.items()
                    if column not in {"org_granted", "global_granted"}
                },
                agent_id=seen["agent_id"],
                org_id=seen["org_id"],
                stamp=stamp,
            )

    def _decide(
        self,
        conn: Connection,
        seen: dict[str, Any],
        agent_id: UUID,
        slot_key: str,
        from_version: str | None,
        now: datetime,
        track: ReleaseTrack,
    ) -> Claim:
        """The hot path's row → a refusal (raised), the same claim again, or a grant."""
        slot = checked_slot_of(seen, slot_key, now)
        existing_run: UUID | None = seen["existing_run_id"]
        if existing_run is not None:
            if seen["existing_status"] != "claimed":
                raise _slot_consumed(slot_key, f"was already consumed ({seen['existing_status']})")
            if seen["existing_token_usable"]:
                return Claim(created=False, grant=claim_grant(conn, existing_run))
            # Its token was revoked (the brake) or ran out: a new lease, through the caps.
        elif seen["last_consumed_at"] is not None and slot.at <= seen["last_consumed_at"]:
            raise _slot_consumed(slot_key, "is at or before a slot this agent has already consumed")
        if seen["brake_engaged"]:
            raise _brake(seen["brake_reason"])
        org_cap, global_cap = seen["org_cap"], seen["global_cap"]
        _refuse_when_full(now, org_cap, global_cap, seen["org_granted"], seen["global_granted"])
        # Holds, halts and the release brake (issue 14), only for a request that saw room.
        offer = check_scheduled_claim(
            conn,
            agent_id=agent_id,
            org_id=seen["org_id"],
            slot_key=slot_key,
            slot_at=slot.at,
            track=track,
            now=now,
        )
        if existing_run is None:
            # Only with room to grant: the herd's cap-full refusals above never pay for it.
            refuse_rolled_back_release(
                conn,
                agent_id=agent_id,
                org_id=seen["org_id"],
                slot_key=slot_key,
                slot_at=slot.at,
                from_version=from_version,
                track=track,
                now=now,
                offer=offer,
            )
        # The checks above took round trips, in which other grants may have filled the round:
        # what this worker learnt meanwhile spares a grant transaction bound to fail.
        current_round = round_start(now)
        _refuse_when_full(
            now,
            org_cap,
            global_cap,
            self._memory.granted(current_round, seen["org_id"]),
            self._memory.granted(current_round, None),
        )
        try:
            grant = self._grant(
                conn,
                agent_id=agent_id,
                org_id=seen["org_id"],
                slot_key=slot_key,
                slot_at=slot.at,
                from_version=from_version,
                existing_run=existing_run,
                caps=(org_cap, global_cap),
                track=track,
                now=now,
            )
        except psycopg.errors.UniqueViolation:
            # The same agent raced itself for this slot; the other request won. Its answer.
            return self._existing_claim(conn, agent_id, slot_key)
        return Claim(created=existing_run is None, grant=grant)

    def _existing_claim(self, conn: Connection, agent_id: UUID, slot_key: str) -> Claim:
        row = conn.execute(
            "SELECT id, status FROM runs WHERE agent_id = %s AND trigger = 'schedule'"
            " AND slot_key = %s",
            [agent_id, slot_key],
        ).fetchone()
        if row is None or row["status"] != "claimed":
            raise _slot_consumed(slot_key, "was already consumed")
        return Claim(created=False, grant=claim_grant(conn, row["id"]))

    def _grant(
        self,
        conn: Connection,
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
                    raise _brake(brake["reason"])
                # The pair's pointer stays locked; the agent's offer (its pin, or the release at the
                # stage the agent is in) is what it is granted, its row locked against a halt.
                release = release_for_grant(conn, agent_id=agent_id, org_id=org_id, track=track)
                if release is None:
                    raise _no_release(track)
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
                    self._memory.note_granted(current_round, org_id, org_cap)
                    raise _org_cap_full(now, org_cap) from None
                self._memory.note_granted(current_round, None, global_cap)
                raise _global_cap_full(now, global_cap) from None
            if isinstance(failed, psycopg.Error) and not isinstance(
                failed, psycopg.errors.UniqueViolation
            ):
                # Statements queued behind the failed one were skipped (see above). A run's
                # UniqueViolation is read at once, with nothing queued behind it, and the
                # caller reads the winner's claim on this same connection.
                conn.close()
            raise
        # Committed: the counts this grant left are true for the rest of the round.
        self._memory.note_granted(current_round, org_id, counted["org_granted"])
        self._memory.note_granted(current_round, None, counted["global_granted"])
        return grant

    def claim_manual(
        self,
        agent_id: UUID,
        manual_run_id: UUID,
        from_version: str | None,
        now: datetime,
        *,
        track: ReleaseTrack = DEFAULT_TRACK,
    ) -> Claim:
        """The token for a manual update requested in the panel: no slot, no caps; the brake or a
        halt of its release refuses it unless an operator forced it (`rollout.gate`)."""
        with self._pool.connection() as conn, conn.transaction():
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
                raise _no_release(track)
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
