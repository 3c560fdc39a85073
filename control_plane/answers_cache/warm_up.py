"""A slot's claim facts for every agent due, remembered before the herd asks for them.

At 03:00 every agent's first claim in a worker used to be a database round trip of its own —
4,000 of them in the herd benchmark's first round, per worker — only to learn facts that are
the same for every round of the window: the agent behind the credential, its schedule, the
settings, the brake, the slot it last consumed, the release it is offered. Once a worker's
database has answered a claim for a slot that is open for the agent who asked (a real agent's
open slot, so a stranger's made-up keys cost nothing), that worker reads the facts of every
agent due at that wall time in one read (`claims.due_facts`, handed in as `read`: what the facts
are is the claims' business) and remembers them as the hot statement's own reads would be:

- under a stamp taken before the read: an agent, organisation or platform change applied
  meanwhile spoils its rows (`AnswerMemory.remember_many`), so the change feed's bound holds
  exactly as for a single read;
- at most `WARM_LIMIT` rows, never pushing out what requests have read themselves.

A warm-up of a slot is done once per memory epoch (a change of everything, a lapse of the feed,
forgets every remembered row and starts a new epoch) and at most every `WARM_EVERY_SECONDS`, in
the request that asked for it (on the connection it already holds; no thread of its own). Its
read is a request's statement, under the requests' `statement_timeout`: a fleet too large to read
in that time is not warmed up (said in the log), and the claim that asked goes on without it,
answered as it would have been.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from datetime import datetime
from uuid import UUID

import psycopg

from control_plane.answers_cache.memory import AnswerMemory
from control_plane.types import Connection

__all__ = ["WARM_EVERY_SECONDS", "WARM_LIMIT", "DueFacts", "SlotWarmUp"]

# A warm-up reads every agent due at one wall time: a fleet's worth of rows. Bounded so that a
# memory of `MAX_ENTRIES` keeps room for the configs of the same fleet.
WARM_LIMIT = 100_000
# Real seconds between two warm-ups of one slot in one worker, whatever forgot the first.
WARM_EVERY_SECONDS = 10.0
logger = logging.getLogger(__name__)

# Slots whose warm-up time is kept (at 03:00 there is one; a few more for schedules' other times).
_SLOTS_KEPT = 64

# (connection, slot key, the request's time, limit) -> (key, value, agent, organisation) rows.
DueFacts = Callable[[Connection, str, datetime, int], list[tuple[Hashable, object, UUID, UUID]]]


class SlotWarmUp:
    """Remembers the facts of every agent due at a slot, when asked, within its limits."""

    def __init__(
        self,
        memory: AnswerMemory,
        read: DueFacts,
        *,
        limit: int = WARM_LIMIT,
        every_seconds: float = WARM_EVERY_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._memory = memory
        self._read = read
        self._limit = limit
        self._every = every_seconds
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._busy = False
        self._done: dict[str, tuple[int, float]] = {}  # slot key -> (epoch, when)

    def ask(self, conn: Connection, slot_key: str, at: datetime) -> int:
        """Warm `slot_key` up unless it is already warm in this epoch, was warmed less than
        `every_seconds` ago, or another request is warming; returns the rows remembered. `at` is
        the request's product time, for `read`."""
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
        except psycopg.errors.QueryCanceled as exc:
            # The read ran longer than a request's statement may (the connection is left idle:
            # autocommit). Tried again after `every_seconds`; the claims read their own facts.
            said = exc.diag.message_primary or type(exc).__name__
            logger.warning(
                "warm-up of slot %s not done (%s): the claims read their own facts; a larger"
                " --request-statement-timeout-seconds lets it finish",
                slot_key,
                said,
            )
            return 0
        finally:
            with self._lock:
                self._busy = False

    def _warm(self, conn: Connection, slot_key: str, at: datetime) -> int:
        stamp = self._memory.stamp()  # before the read: a change applied meanwhile wins
        if stamp is None:
            return 0
        return self._memory.remember_many(self._read(conn, slot_key, at, self._limit), stamp=stamp)
