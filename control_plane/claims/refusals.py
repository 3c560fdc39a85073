"""The claim refusals as facts for the miss reasons, recorded off the refusal's hot path.

The claim endpoint refuses almost every request at 03:00 and must not write per refusal.
So a refusal only lands in an in-memory set keyed by (agent, slot key, reason) — an agent retrying
every minute adds nothing new — and a background flusher writes the new facts in batches with
`INSERT … ON CONFLICT DO NOTHING`. A crash loses at most the facts of the last flush interval; the
worker then reports such a miss as `unknown`, or `offline` when the agent was provably not seen.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable
from datetime import datetime
from uuid import UUID

import psycopg

from control_plane.background import LoopThread
from control_plane.repeated_warning import UnwrittenBatch
from control_plane.types import Pool
from ground.contract import RefusalCode

__all__ = ["FACT_REASONS", "RefusalRecorder"]

# The refusal codes that explain a miss; the others (a slot that is not one, a closed window, …)
# do not.
FACT_REASONS = frozenset({RefusalCode.ORG_CAP, RefusalCode.GLOBAL_CAP, RefusalCode.BRAKE})

logger = logging.getLogger(__name__)

# While the refusals cannot be written, the warning is repeated this often (real seconds).
REPEAT_SECONDS = 60.0

# Inserted in the key's order: every worker flushes its own batch, and an agent that asks again
# every round is refused by more than one worker, so two batches hold the same facts. In the
# order each worker had noted them, two flushes deadlocked on the key's index (one waited a
# second, `deadlock_timeout`, and failed); in one order, the second waits for the first.
_FLUSH = """
INSERT INTO claim_refusals (agent_id, slot_key, reason, first_at)
SELECT f.* FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::timestamptz[])
    AS f(agent_id, slot_key, reason, first_at)
 -- An agent deleted since it was refused has nothing left to explain.
 WHERE EXISTS (SELECT 1 FROM agents a WHERE a.id = f.agent_id)
 ORDER BY f.agent_id, f.slot_key, f.reason
ON CONFLICT DO NOTHING
"""

_Fact = tuple[UUID, str, str]


class RefusalRecorder:
    """`record` is O(1) and does no I/O; `flush` (or the started flusher thread) writes."""

    def __init__(
        self,
        pool: Pool,
        *,
        max_pending: int = 200_000,
        remembered: int = 200_000,
        flush_interval_seconds: float = 1.0,
        monotonic: Callable[[], float] | None = None,
    ) -> None:
        self._pool = pool
        self._max_pending = max_pending
        self._remembered = remembered
        self._interval = flush_interval_seconds
        self._lock = threading.Lock()
        self._pending: dict[_Fact, datetime] = {}
        # Facts already written: a fleet retrying every minute re-reports the same facts.
        self._written: OrderedDict[_Fact, None] = OrderedDict()
        self._refused: Counter[str] = Counter()
        self._dropped = 0
        self._loop = LoopThread("nachtwacht-refusal-flusher")
        # A flush every second that fails for a whole outage (or behind a held lock) says so
        # once, then every minute, and once when it writes again.
        self._unwritten = UnwrittenBatch(
            logger, "claim refusals", "the next flush", REPEAT_SECONDS, monotonic=monotonic
        )

    def record(self, agent_id: UUID, slot_key: str, reason: RefusalCode, at: datetime) -> None:
        """Note one refusal. Counted for the metrics; kept as a fact when it explains a miss."""
        with self._lock:
            code = str(reason)
            self._refused[code] += 1
            if code not in FACT_REASONS:
                return
            fact = (agent_id, slot_key, code)
            if fact in self._pending or fact in self._written:
                return
            if len(self._pending) >= self._max_pending:
                self._dropped += 1
                return
            self._pending[fact] = at

    def count(self, reason: RefusalCode) -> None:
        """Count a refusal for the metrics without keeping a fact: a manual update's, which has
        no slot to miss."""
        with self._lock:
            self._refused[str(reason)] += 1

    def refused_counts(self) -> dict[str, int]:
        """Refused claim requests seen by this replica since it started, by refusal code."""
        with self._lock:
            return dict(self._refused)

    @property
    def dropped(self) -> int:
        """Facts not kept because the buffer was full (the database was away for long)."""
        with self._lock:
            return self._dropped

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def flush(self) -> int:
        """Write the buffered facts in one statement; returns how many were sent. When the
        database is unreachable the facts go back into the buffer and the error is raised."""
        with self._lock:
            batch, self._pending = self._pending, {}
        if not batch:
            return 0
        facts = list(batch)
        try:
            with self._pool.connection() as conn:
                conn.execute(
                    _FLUSH,
                    [
                        [fact[0] for fact in facts],
                        [fact[1] for fact in facts],
                        [fact[2] for fact in facts],
                        [batch[fact] for fact in facts],
                    ],
                )
        except psycopg.OperationalError:
            with self._lock:
                for fact in facts:
                    self._pending.setdefault(fact, batch[fact])
            raise
        with self._lock:
            for fact in facts:
                self._written[fact] = None
            while len(self._written) > self._remembered:
                self._written.popitem(last=False)
        return len(facts)

    def start(self, *, interval_seconds: float | None = None) -> None:
        """Flush every `interval_seconds` (real seconds; default: the constructor's) in a daemon
        thread until `stop`."""
        if self._loop.running:
            return
        if interval_seconds is not None:
            self._interval = interval_seconds
        self._loop.start(self._flush_until_stopped)

    def stop(self) -> None:
        """Stop the flusher and write what is still buffered."""
        self._loop.stop()
        self.flush_logged()

    def _flush_until_stopped(self) -> None:
        while not self._loop.wait(self._interval):
            self.flush_logged()

    def flush_logged(self) -> None:
        """`flush`, a failure said in the log (at once, then every `REPEAT_SECONDS` while it
        lasts, and once when a flush writes again) instead of raised."""
        try:
            self.flush()
        except psycopg.Error as exc:
            self._unwritten.failed(exc)
            return
        self._unwritten.written()
