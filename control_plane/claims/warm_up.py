"""The claim's facts for a whole slot, read in one statement before the herd asks for them.

At 03:00 every agent's first claim in a worker used to be a database round trip of its own —
4,000 of them in the herd benchmark's first round, per worker — only to learn facts that are
the same for every round of the window: the agent behind the credential, its schedule, the
settings, the brake, the slot it last consumed. Once a worker's database has answered a claim
for a slot that is open for the agent who asked (a real agent's open slot, so a stranger's
made-up keys cost nothing), that worker reads the facts of every agent due at that wall time
in one statement and remembers them as the hot statement's own reads would be remembered:

- the same columns as `services._HOT_PATH`, for each valid agent credential (not revoked, the
  agent's audience), without the round's counters (those are never remembered with a row) and
  only for agents with no run for the slot (a run's token turns with the clock) and no hold in
  force (one that ends turns with the clock too: such an agent's claim reads its own);
- with the release each agent is offered on the pair it follows (`claims.offered`, a few
  set-based reads for all of them), remembered under that pair: a claim on another pair reads
  its own;
- under a stamp taken before the read: an agent, organisation or platform change applied
  meanwhile spoils its rows (`AnswerMemory.remember_many`), so the change feed's bound holds
  exactly as for a single read;
- at most `WARM_LIMIT` rows, never pushing out what requests have read themselves.

A warm-up of a slot is done once per memory epoch (a change of everything, a lapse of the feed,
forgets every remembered row and starts a new epoch) and at most every `WARM_EVERY_SECONDS`, in
the request that asked for it (on the connection it already holds; no thread of its own).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from uuid import UUID

from control_plane.answers_cache import AnswerMemory
from control_plane.claims.decision import ClaimFacts
from control_plane.claims.offered import offered_releases
from control_plane.types import Connection
from ground.contract import ReleaseTrack

__all__ = ["WARM_EVERY_SECONDS", "WARM_LIMIT", "SlotWarmUp", "facts_key"]

# A warm-up reads every agent due at one wall time: a fleet's worth of rows. Bounded so that a
# memory of `MAX_ENTRIES` keeps room for the configs of the same fleet.
WARM_LIMIT = 100_000
# Real seconds between two warm-ups of one slot in one worker, whatever forgot the first.
WARM_EVERY_SECONDS = 10.0
# Slots whose warm-up time is kept (at 03:00 there is one; a few more for schedules' other times).
_SLOTS_KEPT = 64

# Driven from the credentials, each agent found by its primary key (`OFFSET 0` keeps the
# planner from flattening the lookup into a join it may plan as a nested loop of scans: on a
# database whose statistics are not gathered yet, 4,000 agents took 0.9 s instead of 0.02 s).
_WARM = """
SELECT c.secret_sha256, a.*,
       s.timezone, s.catch_up_minutes, s.org_cap, s.global_cap,
       b.engaged AS brake_engaged, b.reason AS brake_reason
  FROM credentials c
 CROSS JOIN LATERAL (
        SELECT a.id AS agent_id, a.org_id,
               a.update_schedule_enabled AS enabled, a.update_schedule_times AS times,
               (SELECT max(r.slot_at) FROM runs r
                 WHERE r.agent_id = a.id AND r.trigger = 'schedule') AS last_consumed_at
          FROM agents a
         WHERE a.id = c.agent_id
           AND a.update_schedule_enabled AND a.update_schedule_times ? %(wall)s
           AND NOT EXISTS (SELECT 1 FROM runs r
                            WHERE r.agent_id = a.id AND r.trigger = 'schedule'
                              AND r.slot_key = %(slot_key)s)
           AND NOT EXISTS (SELECT 1 FROM holds h
                            WHERE h.agent_id = a.id AND h.until > %(now)s)
        OFFSET 0
       ) a
 CROSS JOIN platform_settings s
 CROSS JOIN platform_brake b
 WHERE c.audience = 'agent' AND c.revoked_at IS NULL
 LIMIT %(limit)s
"""
# The hot statement's columns that a warmed row has no value for: no run, no hold in force.
_NO_RUN = {
    "existing_run_id": None,
    "existing_status": None,
    "existing_token_usable": None,
    "hold_until": None,
    "hold_reason": None,
    "hold_set_by": None,
}


# The offered release depends on the pair a claim names, so the facts are kept per credential,
# slot and pair.
def facts_key(secret_sha256: str, slot_key: str, track: ReleaseTrack) -> tuple[str, ...]:
    return ("claim", secret_sha256, slot_key, track.channel, track.platform)


class SlotWarmUp:
    """Remembers the facts of every agent due at a slot, when asked, within its limits."""

    def __init__(
        self,
        memory: AnswerMemory,
        *,
        limit: int = WARM_LIMIT,
        every_seconds: float = WARM_EVERY_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._memory = memory
        self._limit = limit
        self._every = every_seconds
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._busy = False
        self._done: dict[str, tuple[int, float]] = {}  # slot key -> (epoch, when)

    def ask(self, conn: Connection, slot_key: str, at: datetime) -> int:
        """Warm `slot_key` up unless it is already warm in this epoch, was warmed less than
        `every_seconds` ago, or another request is warming; returns the rows remembered. `at` is
        the product's time of the request (a hold in force then keeps its agent out)."""
        epoch = self._memory.epoch
        with self._lock:
            now = self._monotonic()
            done = self._done.get(slot_key)
            if (
                self._busy
                or epoch is None
                or (done is not None and (done[0] == epoch or now - done[1] < self._every))
            ):
                return 0
            self._busy = True
            if len(self._done) >= _SLOTS_KEPT:
                self._done.clear()
            self._done[slot_key] = (epoch, now)
        try:
            return self._warm(conn, slot_key, at)
        finally:
            with self._lock:
                self._busy = False

    def _warm(self, conn: Connection, slot_key: str, now: datetime) -> int:
        stamp = self._memory.stamp()  # before the read: a change applied meanwhile wins
        if stamp is None:
            return 0
        rows = conn.execute(
            _WARM,
            {"wall": slot_key[11:16], "slot_key": slot_key, "limit": self._limit, "now": now},
        ).fetchall()
        offered = offered_releases(
            conn, list(dict.fromkeys((row["agent_id"], row["org_id"]) for row in rows))
        )
        facts: list[tuple[tuple[str, ...], object, UUID, UUID]] = []
        for row in rows:
            track, release = offered[row["agent_id"]]
            agent = ClaimFacts.of_row({**row, **_NO_RUN}, offered=release)
            key = facts_key(row["secret_sha256"], slot_key, track)
            facts.append((key, agent, agent.agent_id, agent.org_id))
        return self._memory.remember_many(facts, stamp=stamp)
