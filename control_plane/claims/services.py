"""Throttle tokens: the claim of a slot, within the caps.

The refusal is the hot path — nearly every agent is at 03:00 and 25 a minute get through — so it
is one read-only statement: the agent, its schedule, its hold, the settings, the brake, its runs
for the slot and this round's two counters; then, unless the brake or a hold already refuses, the
release it is offered on the claim's pair (`claims.offered`: a few reads). Nothing is locked and
nothing is written. They become `ClaimFacts`, and `claims.decision.refusal_for` answers from
them, in the contract's order, as it does on facts the answers' memory remembered
(`refuse_from_memory`). Only a claim they do not refuse opens the grant transaction
(`claims.grant`), where the caps are held exactly (`claims.caps`). The three refusals that
consume the slot for the agent's own reasons (a hold, a stopped release, a release it rolled
back) write the slot's run here, on the database path: the memory leaves them to it.

Every refusal of a scheduled claim is handed to the `RefusalRecorder` here, whoever the caller:
the facts behind the miss reasons must not depend on which route asked.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from uuid import UUID

import psycopg

from control_plane.accounts.services import AGENT_OF_CREDENTIAL
from control_plane.agent_scope import unknown_agent
from control_plane.answers_cache import AnswerMemory, Changes
from control_plane.answers_cache.in_flight import GrantsInFlight, KnownRoom
from control_plane.answers_cache.seen import SeenRecorder
from control_plane.answers_cache.warm_up import SlotWarmUp
from control_plane.claims.caps import RoundCounts, cap_refusal, round_start
from control_plane.claims.decision import ClaimFacts, refusal_for, slot_of
from control_plane.claims.due_facts import due_facts, facts_key
from control_plane.claims.grant import Claim, ScheduledGrant, claim_grant, grant_token
from control_plane.claims.manual import CAPPED_MANUAL_CONTRACT, claim_manual
from control_plane.claims.offered import offered_releases
from control_plane.claims.refusals import RefusalRecorder
from control_plane.claims.refused import slot_consumed
from control_plane.errors import ClaimRefused
from control_plane.inputs import agent_text, stored_text
from control_plane.releases.products import Product
from control_plane.rollout.gate import (
    note_track,
    record_held_slot,
    record_skipped_slot,
    skip_stopped_slot,
)
from control_plane.settings.services import read_settings
from control_plane.types import Connection, Pool
from control_plane.updater_versions import note_updater_version
from ground.contract import (
    DEFAULT_TRACK,
    ClaimRequest,
    Instant,
    RefusalCode,
    ReleaseTrack,
)
from ground.contract.messages import MAX_SLOT_KEY_LENGTH
from ground.limits import MAX_VERSION_LENGTH

# `Claim` is the grant's (`claims.grant`), named here for the callers of the service.
__all__ = ["Claim", "ClaimService", "GrantHistory", "RoundGrants"]


_HOT_PATH = """
SELECT a.id AS agent_id, a.org_id,
       a.update_schedule_enabled AS enabled, a.update_schedule_times AS times,
       a.created_at AS enrolled_at,
       s.timezone, s.catch_up_minutes, s.grant_margin_seconds, s.org_cap, s.global_cap,
       b.engaged AS brake_engaged, b.reason AS brake_reason,
       h.until AS hold_until, h.reason AS hold_reason, h.set_by AS hold_set_by,
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
  LEFT JOIN holds h ON h.agent_id = a.id
  LEFT JOIN LATERAL (
        SELECT r.id, r.status,
               (t.revoked_at IS NULL AND t.expires_at > %(now)s) AS token_usable
          FROM runs r LEFT JOIN tokens t ON t.run_id = r.id
         WHERE r.agent_id = a.id AND r.trigger = 'schedule' AND r.slot_key = %(slot_key)s
       ) existing ON true
 WHERE a.id = {agent}
"""

_HOT_PATH_BY_ID = _HOT_PATH.format(agent="%(agent_id)s")
_HOT_PATH_BY_CREDENTIAL = _HOT_PATH.format(agent=f"({AGENT_OF_CREDENTIAL})")


# Refusals that write the slot consumed as a run (the answer of the agent's next claim changes):
# given only by the database path, which writes the run.
_RECORDED_CONSUMED = frozenset(
    {RefusalCode.HELD, RefusalCode.RELEASE_ROLLED_BACK, RefusalCode.RELEASE_HALTED}
)


def _facts_of(
    conn: Connection,
    row: dict[str, object],
    track: ReleaseTrack,
    now: datetime,
    product: Product = "agent",
) -> ClaimFacts:
    """The facts of the hot statement's row, with the release of `product` offered on `track`
    unless what stops the agent first (the brake, a hold) already refuses (`claims.decision`)."""
    facts = ClaimFacts.of_row(row, offered=None)
    if facts.brake_engaged or facts.held_at(now) is not None:
        return facts
    offered = offered_releases(
        conn, [(facts.agent_id, facts.org_id)], {facts.agent_id: track}, product=product
    )
    return replace(facts, offered=offered[facts.agent_id][1])


def _is_open(facts: ClaimFacts, slot_key: str, now: datetime) -> bool:
    """Whether `slot_key` is an open slot of the agent read (the slot check is memoized)."""
    try:
        slot_of(facts, slot_key, now)
    except ClaimRefused:
        return False
    return True


@dataclass(frozen=True, kw_only=True)
class _Asking:
    """What a scheduled claim asks for beyond its slot: which program it updates, and the version
    of nachtwacht's own agent that asks (None: it did not say)."""

    product: Product = "agent"
    updater_version: str | None = None


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
        self,
        pool: Pool,
        refusals: RefusalRecorder,
        *,
        memory: AnswerMemory | None = None,
        seen: SeenRecorder | None = None,
    ) -> None:
        self._pool = pool
        self._refusals = refusals
        self._memory = memory or AnswerMemory()
        self._seen = seen
        self._warm_up = SlotWarmUp(self._memory, due_facts)
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

    def claim(
        self, agent_id: UUID, request: ClaimRequest, now: datetime, *, agent_contract: int
    ) -> Claim:
        """A scheduled slot's or a manual update's token (the request names exactly one), for an
        agent that speaks `agent_contract` (a manual update goes through the caps for an agent
        that waits when they are full: `claims.manual`)."""
        from_version = agent_text("from_version", request.from_version, MAX_VERSION_LENGTH)
        updater_version = agent_text("updater_version", request.updater_version, MAX_VERSION_LENGTH)
        if request.manual_run_id is not None:
            try:
                return claim_manual(
                    self._pool,
                    agent_id,
                    request.manual_run_id,
                    from_version,
                    now,
                    track=request.track,
                    through_caps=agent_contract >= CAPPED_MANUAL_CONTRACT,
                )
            except ClaimRefused as refused:
                # Counted for the metrics, as every refusal is; no fact is kept: a manual
                # update has no slot whose miss it would explain.
                self._refusals.count(refused.refusal)
                raise
        # Checked here too, not only at the API's door: the hot path's SELECT takes the key
        # before the planner has judged it.
        slot_key = stored_text("slot_key", request.slot_key, MAX_SLOT_KEY_LENGTH)
        assert slot_key is not None, "ClaimRequest names exactly one"
        return self.claim_slot(
            agent_id,
            slot_key,
            from_version,
            now,
            track=request.track,
            product=request.product,
            updater_version=updater_version,
        )

    def claim_slot(
        self,
        agent_id: UUID,
        slot_key: str,
        from_version: str | None,
        now: datetime,
        *,
        track: ReleaseTrack = DEFAULT_TRACK,
        product: Product = "agent",
        updater_version: str | None = None,
    ) -> Claim:
        """Grant a token for a scheduled slot with the current release of `track` (of `product`:
        the managed agent's, or nachtwacht's own agent's), or raise the refusal (and record it as
        a fact). `updater_version`: the version of nachtwacht's own agent that asks, kept with
        the agent when a grant is made."""
        claim = self._claim_slot(
            _HOT_PATH_BY_ID,
            {"agent_id": agent_id},
            slot_key,
            from_version,
            now,
            track,
            _Asking(product=product, updater_version=updater_version),
        )
        if claim is None:
            raise unknown_agent(agent_id)
        return claim

    def claim_slot_as(
        self,
        secret_sha256: str,
        slot_key: str,
        from_version: str | None,
        now: datetime,
        *,
        track: ReleaseTrack,
        product: Product = "agent",
        updater_version: str | None = None,
    ) -> Claim | None:
        """`claim_slot` for the agent behind a presented credential, found in the same statement
        (the refusal's one round trip); None when no agent has that valid credential."""
        checked = agent_text("from_version", from_version, MAX_VERSION_LENGTH)
        asking = _Asking(
            product=product,
            updater_version=agent_text("updater_version", updater_version, MAX_VERSION_LENGTH),
        )
        return self._claim_slot(
            _HOT_PATH_BY_CREDENTIAL,
            {"secret_sha256": secret_sha256},
            slot_key,
            checked,
            now,
            track,
            asking,
        )

    def _claim_slot(
        self,
        statement: str,
        agent: dict[str, object],
        slot_key: str,
        from_version: str | None,
        now: datetime,
        track: ReleaseTrack,
        asking: _Asking,
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
            facts = _facts_of(conn, seen, track, now, asking.product)
            read = RoundCounts(
                org_granted=seen["org_granted"] or 0, global_granted=seen["global_granted"] or 0
            )
            self._remember(agent, slot_key, track, current_round, facts, read, stamp, now)
            # What this worker learnt since the read began (another request's grant that found
            # the round full): a round's count only grows, so the higher one is as true.
            counts = self._known_counts(current_round, facts.org_id, read)
            if _is_open(facts, slot_key, now):
                # A real agent's open slot: the rest of the herd is about to ask about it too.
                self._warm_up.ask(conn, slot_key, now)
            refusal = refusal_for(facts, counts, slot_key, now)
            try:
                if refusal is not None:
                    raise refusal
                claim = self._grant(conn, facts, slot_key, from_version, now, track, asking)
            except ClaimRefused as refused:
                # Buffered in memory: the refusal path itself writes nothing, but for the
                # refusals that record the slot consumed (a run written).
                if refused.refusal in _RECORDED_CONSUMED:
                    _record_consumed(conn, facts, refused.refusal, slot_key, from_version, now)
                    self._memory.writes.note()
                self._refused(facts.agent_id, slot_key, refused.refusal, now)
                raise
            # This worker's own grant is honoured by its memory at once (others: the feed).
            self._memory.apply(Changes(agents=frozenset({facts.agent_id})))
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
        """Raise (and record) the refusal that the remembered facts of this claim give, by the
        same `refusal_for` as the database's row; when they give none, return the room this
        worker knows of in the claim's round — the caps less the highest counts seen — for the
        database to decide; None when it remembers nothing of the claim (or is not live)."""
        # The same check of the text as the database's path (`claim_slot_as`) makes first.
        agent_text("from_version", from_version, MAX_VERSION_LENGTH)
        facts = self._memory.recall(facts_key(secret_sha256, slot_key, track), now=now)
        if not isinstance(facts, ClaimFacts):
            return None
        current_round = round_start(now)
        counts = self._known_counts(current_round, facts.org_id, RoundCounts())
        refusal = refusal_for(facts, counts, slot_key, now)
        if refusal is not None and refusal.refusal in _RECORDED_CONSUMED:
            return None  # the slot's run is written by the database path
        if refusal is not None:
            self._refused(facts.agent_id, slot_key, refusal.refusal, now)
            try:
                raise refusal
            finally:
                # Not left in this frame, which the refusal's traceback holds: that cycle made
                # each refusal of the 03:00 herd (its request's closures with it) garbage for the
                # collector, instead of freed as its answer goes out.
                del refusal
        return KnownRoom(
            round_start=current_round,
            org_id=facts.org_id,
            org_room=facts.caps.org_cap - counts.org_granted,
            global_room=facts.caps.global_cap - counts.global_granted,
        )

    def _refused(self, agent_id: UUID, slot_key: str, refusal: RefusalCode, now: datetime) -> None:
        """Keep a refusal of a scheduled claim for the miss reasons. A window found closing or
        closed is the control plane hearing from the agent: one that first asks in the window's
        last minute (offline until then, or its poll lost) missed its slot while it was there,
        not offline."""
        self._refusals.record(agent_id, slot_key, refusal, now)
        if refusal is RefusalCode.WINDOW_CLOSED and self._seen is not None:
            self._seen.saw(agent_id, now)

    def _known_counts(
        self, current_round: datetime, org_id: UUID, read: RoundCounts
    ) -> RoundCounts:
        """The higher of the counts read and those this worker has seen for the round."""
        org_seen, global_seen = self._memory.granted_in_round(current_round, org_id)
        return RoundCounts(
            org_granted=max(read.org_granted, org_seen),
            global_granted=max(read.global_granted, global_seen),
        )

    def _remember(
        self,
        agent: dict[str, object],
        slot_key: str,
        track: ReleaseTrack,
        current_round: datetime,
        facts: ClaimFacts,
        read: RoundCounts,
        stamp: int | None,
        now: datetime,
    ) -> None:
        """Keep what the database path read for `refuse_from_memory`: the round's counts apart
        (they only grow inside a round, whoever reads them), the facts under the credential and
        the pair. Facts with a run for the slot are not kept: its token's validity depends on
        `now`; facts with a hold in force only until it ends."""
        self._memory.note_granted(current_round, facts.org_id, read.org_granted)
        self._memory.note_granted(current_round, None, read.global_granted)
        secret_sha256 = agent.get("secret_sha256")
        if isinstance(secret_sha256, str) and facts.existing_run is None:
            hold = facts.held_at(now)
            self._memory.remember(
                facts_key(secret_sha256, slot_key, track),
                facts,
                agent_id=facts.agent_id,
                org_id=facts.org_id,
                stamp=stamp,
                until=None if hold is None else hold.until,
            )

    def _grant(
        self,
        conn: Connection,
        facts: ClaimFacts,
        slot_key: str,
        from_version: str | None,
        now: datetime,
        track: ReleaseTrack,
        asking: _Asking,
    ) -> Claim:
        """A claim its facts do not refuse: the same claim again, or the grant; or the refusal
        the grant's transaction found (a cap full, the brake or a halt under their locks)."""
        run = facts.existing_run
        if asking.updater_version is not None:
            note_updater_version(conn, facts.agent_id, asking.updater_version, now)
        if run is not None and run.holds_its_token:
            return Claim(created=False, grant=claim_grant(conn, run.run_id))
        slot = slot_of(facts, slot_key, now)
        note_track(conn, facts.agent_id, track, now)
        # The reads since the hot statement took round trips, in which other grants may have
        # filled the round: what this worker learnt meanwhile spares a grant transaction bound
        # to fail.
        current_round = round_start(now)
        full = cap_refusal(
            facts.caps, self._known_counts(current_round, facts.org_id, RoundCounts()), now
        )
        if full is not None:
            raise full
        try:
            granted = grant_token(
                conn,
                ScheduledGrant(
                    agent_id=facts.agent_id,
                    org_id=facts.org_id,
                    slot_key=slot_key,
                    slot_at=slot.at,
                    from_version=from_version,
                    existing_run=None if run is None else run.run_id,
                    caps=facts.caps,
                    track=track,
                    now=now,
                    product=asking.product,
                ),
            )
        except ClaimRefused as refused:
            # A cap found full, as committed by other grants: full until the round ends (it
            # never un-fills), so this worker refuses the rest of the round from memory.
            if refused.refusal is RefusalCode.ORG_CAP:
                self._memory.note_granted(current_round, facts.org_id, facts.caps.org_cap)
            elif refused.refusal is RefusalCode.GLOBAL_CAP:
                self._memory.note_granted(current_round, None, facts.caps.global_cap)
            raise
        except psycopg.errors.UniqueViolation:
            # The same agent raced itself for this slot; the other request won. Its answer.
            return self._existing_claim(conn, facts.agent_id, slot_key)
        # Committed: the counts this grant left are true for the rest of the round.
        self._memory.note_granted(current_round, facts.org_id, granted.counts.org_granted)
        self._memory.note_granted(current_round, None, granted.counts.global_granted)
        return Claim(created=run is None, grant=granted.grant)

    def _existing_claim(self, conn: Connection, agent_id: UUID, slot_key: str) -> Claim:
        row = conn.execute(
            "SELECT id, status FROM runs WHERE agent_id = %s AND trigger = 'schedule'"
            " AND slot_key = %s",
            [agent_id, slot_key],
        ).fetchone()
        if row is None or row["status"] != "claimed":
            raise slot_consumed(slot_key, "was already consumed")
        return Claim(created=False, grant=claim_grant(conn, row["id"]))


def _record_consumed(
    conn: Connection,
    facts: ClaimFacts,
    refusal: RefusalCode,
    slot_key: str,
    from_version: str | None,
    now: datetime,
) -> None:
    """Write the run of a slot consumed by `refusal` (a hold, a stopped release — found by the
    facts or, halted meanwhile, by the grant's lock — or a release this host rolled back).
    Nothing for a key that is not an open slot of the agent: there is no slot to consume."""
    try:
        slot = slot_of(facts, slot_key, now)
    except ClaimRefused:
        return
    agent_id, org_id, slot_at = facts.agent_id, facts.org_id, slot.at
    if refusal is RefusalCode.HELD:
        record_held_slot(
            conn, agent_id=agent_id, org_id=org_id, slot_key=slot_key, slot_at=slot_at, now=now
        )
        return
    offered = facts.offered
    if offered is None:
        return
    release = {"id": offered.release_id, "agent_version": offered.agent_version}
    if refusal is RefusalCode.RELEASE_HALTED:
        skip_stopped_slot(
            conn,
            agent_id=agent_id,
            org_id=org_id,
            slot_key=slot_key,
            slot_at=slot_at,
            release=release,
            why=offered.stopped or "halted or under its brake",
            now=now,
        )
    elif refusal is RefusalCode.RELEASE_ROLLED_BACK:
        record_skipped_slot(
            conn,
            agent_id=agent_id,
            org_id=org_id,
            slot_key=slot_key,
            slot_at=slot_at,
            reason=refusal,
            release=release,
            now=now,
            from_version=from_version,
            details={"rolled_back_run": str(offered.rolled_back_run)},
        )
