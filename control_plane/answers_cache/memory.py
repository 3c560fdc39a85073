"""`AnswerMemory`: what one worker keeps of the agents' answers, and whether it may answer.

The invariants it keeps and the staleness bound they give are stated once, in the package's
docstring (`control_plane.answers_cache`). Here: answers are kept by key with the agent and
organisation they belong to, so that a change can find them; a stamp is the version of the
changes applied when a read began, spoilt by a later change of its agent, organisation or
everything; the round counts are kept as maxima, without stamps (they only grow).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from uuid import UUID

from control_plane.answers_cache.own_writes import ReplicaWrites

__all__ = ["FRESHNESS_SECONDS", "POLL_SECONDS", "AnswerMemory", "Changes"]

# How often each worker reads the change feed, and how old its last read may be before the
# memory stops answering (real seconds: the bound is about the database, not the product clock).
POLL_SECONDS = 0.5
FRESHNESS_SECONDS = 2.0
# A worker's memory of a large fleet: every agent's config for one pair and its claim facts for
# one slot. Past this the memory starts again empty rather than grow.
MAX_ENTRIES = 200_000
# Round counters are kept for the current round and a few before it (requests straddle a
# round's end).
_ROUNDS_KEPT = timedelta(minutes=3)


@dataclass(frozen=True, kw_only=True)
class Changes:
    """What one read of the feed found changed."""

    agents: frozenset[UUID] = field(default_factory=frozenset)
    orgs: frozenset[UUID] = field(default_factory=frozenset)
    everything: bool = False

    @property
    def empty(self) -> bool:
        return not (self.agents or self.orgs or self.everything)


@dataclass(frozen=True)
class _Entry:
    value: object
    agent_id: UUID
    org_id: UUID
    until: datetime | None  # product time: an answer that turns with the clock (a hold's end)


class AnswerMemory:
    """Thread-safe; `recall` and `granted` are dictionary reads under one lock."""

    def __init__(
        self,
        *,
        freshness_seconds: float = FRESHNESS_SECONDS,
        max_entries: int = MAX_ENTRIES,
        monotonic: Callable[[], float] = time.monotonic,
        writes: ReplicaWrites | None = None,
    ) -> None:
        self.writes = writes or ReplicaWrites()
        self._freshness = freshness_seconds
        self._max_entries = max_entries
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._entries: dict[Hashable, _Entry] = {}
        self._by_agent: dict[UUID, set[Hashable]] = {}
        self._by_org: dict[UUID, set[Hashable]] = {}
        self._granted: dict[tuple[datetime, UUID | None], int] = {}
        self._version = 0
        # The version at which each agent or organisation last changed, and below which every
        # stamp is spoilt (a change of everything, or `_changed` grown past its bound).
        self._changed: dict[UUID, int] = {}
        self._floor = 0
        self._fresh_since: float | None = None
        self._writes_read = 0  # the replica's count of writes when the last read began

    # -- answering --------------------------------------------------------------------------

    @property
    def live(self) -> bool:
        """Whether the memory may answer now (its last read of the feed is recent enough)."""
        with self._lock:
            return self._live()

    def _live(self) -> bool:
        return (
            self._fresh_since is not None
            and self._monotonic() - self._fresh_since < self._freshness
            and self.writes.count() == self._writes_read
        )

    @property
    def epoch(self) -> int | None:
        """Changes whenever every remembered answer is forgotten; None when not live."""
        with self._lock:
            return self._floor if self._live() else None

    def recall(self, key: Hashable, *, now: datetime | None = None) -> object | None:
        """The value remembered under `key`, or None (unknown, the memory is not live, or the
        value was remembered `until` an instant that `now` has reached)."""
        with self._lock:
            if not self._live():
                return None
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry.until is not None and (now is None or now >= entry.until):
                return None
            return entry.value

    def granted_in_round(self, round_start: datetime, org_id: UUID) -> tuple[int, int]:
        """The highest grant counts seen for the round, the organisation's and the total (0 for
        what is not known, or when the memory is not live). One visit for both: every claim
        the memory refuses at 03:00 asks for the two."""
        with self._lock:
            if not self._live():
                return 0, 0
            granted = self._granted
            return granted.get((round_start, org_id), 0), granted.get((round_start, None), 0)

    # -- learning ---------------------------------------------------------------------------

    def stamp(self) -> int | None:
        """Taken before a database read whose row may be remembered; None: do not remember."""
        with self._lock:
            return self._version if self._live() else None

    def remember(
        self,
        key: Hashable,
        value: object,
        *,
        agent_id: UUID,
        org_id: UUID,
        stamp: int | None,
        until: datetime | None = None,
    ) -> bool:
        """Keep `value` under `key` unless a change of its agent, its organisation or everything
        was applied since `stamp` was taken; with `until`, only while the request's `now` is
        before it (an answer that changes when the clock passes an instant, not when something
        is written: a hold that ends)."""
        with self._lock:
            if not self._unspoilt(stamp, agent_id, org_id):
                return False
            if len(self._entries) >= self._max_entries and key not in self._entries:
                self._forget_answers()
            self._keep(key, _Entry(value, agent_id, org_id, until))
            return True

    def _unspoilt(self, stamp: int | None, agent_id: UUID, org_id: UUID) -> bool:
        return (
            stamp is not None
            and stamp >= self._floor
            and self._changed.get(agent_id, -1) <= stamp
            and self._changed.get(org_id, -1) <= stamp
            and self._live()
        )

    def _keep(self, key: Hashable, entry: _Entry) -> None:
        self._entries[key] = entry
        self._by_agent.setdefault(entry.agent_id, set()).add(key)
        self._by_org.setdefault(entry.org_id, set()).add(key)

    def remember_many(
        self, rows: Iterable[tuple[Hashable, object, UUID, UUID]], *, stamp: int | None
    ) -> int:
        """`remember` for (key, value, agent, organisation) rows read in one statement, under
        one lock; returns how many were kept."""
        kept = 0
        with self._lock:
            for key, value, agent_id, org_id in rows:
                if not self._unspoilt(stamp, agent_id, org_id):
                    continue
                if len(self._entries) >= self._max_entries and key not in self._entries:
                    break  # a warm-up never pushes out what requests themselves read
                self._keep(key, _Entry(value, agent_id, org_id, None))
                kept += 1
        return kept

    def note_granted(self, round_start: datetime, org_id: UUID | None, granted: int) -> None:
        """A lower bound of the round's grant count (an organisation's, or the total for None),
        read from the database or learnt from a grant that found the round full; kept as a
        maximum. No stamp: a round's counter never goes down (see the module's docstring)."""
        with self._lock:
            if not self._live():
                return
            key = (round_start, org_id)
            if granted > self._granted.get(key, -1):
                if key not in self._granted:
                    self._drop_rounds_before(round_start - _ROUNDS_KEPT)
                self._granted[key] = granted

    # -- forgetting -------------------------------------------------------------------------

    def apply(
        self,
        changes: Changes,
        *,
        read_started: float | None = None,
        writes_before: int | None = None,
    ) -> None:
        """Forget what `changes` touch. From the feed, `read_started` is when the read that
        found them began (monotonic), now the memory's freshness, and `writes_before` the
        replica's count of writes taken before it; a gap since the previous read longer than
        the freshness bound forgets everything (the feed may have been pruned meanwhile).
        Without them: this worker's own write, forgotten at once."""
        with self._lock:
            gap = read_started is not None and (
                self._fresh_since is None or read_started - self._fresh_since >= self._freshness
            )
            if changes.everything or gap:
                self._forget_everything()
            elif not changes.empty:
                self._forget(self._keys_of(self._by_agent, changes.agents))
                self._forget(self._keys_of(self._by_org, changes.orgs))
                self._version += 1
                if len(self._changed) + len(changes.agents) + len(changes.orgs) > self._max_entries:
                    self._changed.clear()
                    self._floor = self._version  # bounded: every read in flight is spoilt
                else:
                    for subject in changes.agents | changes.orgs:
                        self._changed[subject] = self._version
            if read_started is not None:
                self._fresh_since = read_started
                self._writes_read = self.writes.count() if writes_before is None else writes_before

    def lapse(self) -> None:
        """The feed could not be read: answer nothing from memory until it can again."""
        with self._lock:
            self._forget_everything()
            self._fresh_since = None

    def size(self) -> int:
        with self._lock:
            return len(self._entries)

    def _keys_of(self, index: dict[UUID, set[Hashable]], ids: Iterable[UUID]) -> set[Hashable]:
        keys: set[Hashable] = set()
        for subject in ids:
            keys |= index.get(subject, set())
        return keys

    def _forget(self, keys: set[Hashable]) -> None:
        for key in keys:
            entry = self._entries.pop(key, None)
            if entry is None:
                continue
            for index, subject in ((self._by_agent, entry.agent_id), (self._by_org, entry.org_id)):
                held = index.get(subject)
                if held is not None:
                    held.discard(key)
                    if not held:
                        del index[subject]

    def _forget_answers(self) -> None:
        self._entries.clear()
        self._by_agent.clear()
        self._by_org.clear()

    def _forget_everything(self) -> None:
        self._forget_answers()
        self._granted.clear()
        self._version += 1
        self._changed.clear()
        self._floor = self._version

    def _drop_rounds_before(self, oldest: datetime) -> None:
        for key in [key for key in self._granted if key[0] < oldest]:
            del self._granted[key]
