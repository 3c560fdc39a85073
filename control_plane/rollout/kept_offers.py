"""Every agent's offer kept in the database, so the fleet's views read it instead of computing
it per request.

`agent_offers` holds, per live agent, what `offers_from` answers for the pair it follows: the
release offered, why, and its wave. The rule is not written again here: the refresh calls
`offers_from` on the agents whose offer may have changed. Which those are, the database says:
every write that can change an offer marks the agents it affects in `agent_offers_stale`, by a
trigger, in the write's own transaction (the list of writes is in the migration that made the
tables, `rev0023_kept_offers`) — whichever code path or replica writes.

A fleet view calls `refresh` first, so what it reads is exact as of that moment: usually a few
agents are stale (a pin, a report of a new version), and after a fleet-wide write (a release
published or promoted, the plan of waves changed) every agent is, once. The reconcile pass
refreshes too, so a reader rarely pays for a fleet-wide write.

Nothing kept depends on the time: the offer is a function of the stored facts alone (a wave
opens when the reconcile pass promotes the release, which writes `releases` and so marks
everyone). What does end at a time — a hold — and what a claim is refused for now — a halt, a
brake — are not kept; the views read them live beside the kept offer.

Concurrency: one refresh at a time (a transaction-level advisory lock, waited for without the
requests' `lock_timeout`). Every write adds a row of
its own to `agent_offer_marks` (no key, so it never finds one there already), and a refresh takes
only the rows committed when it deletes them: a write that commits after the refresh read the
facts leaves its row, and the next refresh computes that agent again. No write waits for a
refresh: `agent_offers_stale` (one mark per agent, with a key: what the previous release
refreshes from, and where its replicas leave their marks) is read when the refresh starts and
cleared of what it read only as it ends. A mark deleted at the start would hold every write that
marks the same agent until the refresh committed — 2.6 s after a fleet-wide write at 10,000
agents, longer than the requests' `lock_timeout`, so reports and enrolments were answered 503.
"""

from __future__ import annotations

from uuid import UUID

from psycopg.rows import tuple_row

from control_plane.rollout.offer import offers_from, read_facts_of
from control_plane.types import Connection

__all__ = ["refresh"]

_LOCK = "SELECT pg_advisory_xact_lock(hashtext('nachtwacht.agent_offers'))"

_STORE = """
INSERT INTO agent_offers (agent_id, channel, platform, release_id, basis, wave)
SELECT * FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::uuid[], %s::text[], %s::int[])
"""


def refresh(conn: Connection) -> int:
    """Recompute the kept offer of every agent marked stale; how many were."""
    with conn.transaction():
        # Another refresh may hold the lock for seconds after a fleet-wide write (2.6 s at 10,000
        # agents): a view waits for it rather than give up at the requests' `lock_timeout`,
        # which is for locks held by something else; its statement's timeout still bounds it.
        conn.execute("SET LOCAL lock_timeout = 0")
        conn.execute(_LOCK)
        with conn.cursor(row_factory=tuple_row) as cursor:
            old_marks = cursor.execute("SELECT agent_id FROM agent_offers_stale").fetchall()
            taken = cursor.execute("DELETE FROM agent_offer_marks RETURNING agent_id").fetchall()
            stale: list[UUID] = sorted({row[0] for row in [*old_marks, *taken]})
            if not stale:
                return 0
            live = cursor.execute(
                "SELECT id, org_id FROM agents WHERE id = ANY(%s) AND deleted_at IS NULL",
                [stale],
            ).fetchall()
        facts = read_facts_of(conn, [(agent_id, org_id) for agent_id, org_id in live])
        offers = offers_from(conn, facts, with_plan=True)
        conn.execute("DELETE FROM agent_offers WHERE agent_id = ANY(%s)", [stale])
        columns: tuple[list[object], ...] = ([], [], [], [], [], [])
        for f in facts:
            offer = offers.offers[f.agent_id]
            row = (
                f.agent_id,
                f.track.channel,
                f.track.platform,
                None if offer.release is None else offer.release["id"],
                offer.basis,
                offers.wave_of(f, f.track),
            )
            for column, value in zip(columns, row, strict=True):
                column.append(value)
        if facts:
            conn.execute(_STORE, list(columns))
        # Last, so a write marking one of these agents waits only for the commit that follows.
        conn.execute(
            "DELETE FROM agent_offers_stale WHERE agent_id = ANY(%s)",
            [[row[0] for row in old_marks]],
        )
    return len(stale)
