"""Claims that wait, in their worker's event loop, for the grants already in flight there.

At a round's start no worker knows the new round's count, so every claim that the memory cannot
refuse goes to the database, and the round's grants queue on its counter rows' locks: a grant
attempt beyond the round's room waits for that lock only to find the round full. So a claim
whose remembered facts say it may be granted is *admitted* only while the grants in flight in
this worker for its round leave room — fewer than the room this worker knows of (the caps less
the highest count it has seen, per organisation and in total) and fewer than
`GRANTS_AT_ONCE` — and otherwise waits until one of them finishes. Then it decides again from
what the worker knows by then: refused from memory when that grant filled the round, admitted
when a grant failed or room is left.

It never refuses a claim the caps would grant: a waiting claim is only ever refused by the
memory's own decision (a count the database gave), and a claim that waited `MAX_WAIT_SECONDS`
goes to the database anyway. A claim whose facts the memory does not know goes at once and is
not counted (its organisation is not known before its read). The caps themselves stay where
they are held exactly: in the grant's counter UPDATEs, under the rows' locks.

The wait is in the hot-answer middleware (`answers_cache.hot_answers`), where the claim's body and
credential are read for the memory anyway, so a claim that waits and is then refused from memory
never reaches FastAPI's routing, dependencies and exception handlers — a round's first claims
are those that wait. A claim the middleware cannot read that way (a body in several parts,
another content type) goes to the route without waiting, like a claim whose facts are unknown.

Used only from the worker's event loop: no lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

__all__ = ["GRANTS_AT_ONCE", "MAX_WAIT_SECONDS", "Admission", "GrantsInFlight", "KnownRoom"]

# Grants of one round commit one after another (each holds the round's counter rows from its
# UPDATE through its commit): a few in flight per worker keep that queue full; more only add
# attempts that wait for the lock and find the round full.
GRANTS_AT_ONCE = 4
# Real seconds: a claim does not wait longer than this for the grants ahead of it (a stalled
# database must not hold the herd in the event loop; past it, the database decides).
MAX_WAIT_SECONDS = 1.0


_Key = tuple[datetime, UUID | None]


@dataclass(frozen=True, kw_only=True)
class KnownRoom:
    """What this worker knows of a claim's round: the room left under each cap (each cap less
    the highest count seen; a round not seen yet is counted as empty)."""

    round_start: datetime
    org_id: UUID
    org_room: int
    global_room: int


class Admission:
    """A claim let through to the database; `finish` when its answer is known (once)."""

    def __init__(self, grants: GrantsInFlight | None, keys: tuple[_Key, ...]) -> None:
        self._grants = grants
        self._keys = keys

    def finish(self) -> None:
        grants, self._grants = self._grants, None
        if grants is not None:
            grants._finished(self._keys)


class GrantsInFlight:
    """The claims admitted per round (per organisation and in total), and the claims waiting.

    A waiting claim waits in the queue of what stops it — its organisation's in-flight claims,
    or the round's — and a finished claim wakes the first waiter of its organisation's queue and
    of the round's, one each: a thousand waiters are not all woken by every grant. A woken claim
    that is refused or admitted wakes the next in its queue, so when a grant fills the round the
    whole queue is refused from memory, one after another, each once."""

    def __init__(
        self,
        *,
        at_once: int = GRANTS_AT_ONCE,
        max_wait_seconds: float = MAX_WAIT_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._at_once = at_once
        self._max_wait = max_wait_seconds
        self._monotonic = monotonic
        self._in_flight: Counter[_Key] = Counter()
        self._waiting: dict[_Key, deque[asyncio.Future[None]]] = {}

    def in_flight(self, round_start: datetime, org_id: UUID | None) -> int:
        """The claims admitted for the round (an organisation's, or all for None) not finished."""
        return self._in_flight[(round_start, org_id)]

    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())

    async def admit(self, known_room: Callable[[], KnownRoom | None]) -> Admission:
        """Wait until the claim may go to the database. `known_room` is asked again after every
        wait: it raises the claim's refusal when the memory now gives one, and returns None when
        the memory does not know the claim's facts (admitted at once, not counted)."""
        deadline = self._monotonic() + self._max_wait
        woken_in: _Key | None = None  # the queue this claim was woken from: it passes the turn on
        while True:
            try:
                room = known_room()
            except BaseException:
                self._wake_first(woken_in)
                raise
            if room is None:
                self._wake_first(woken_in)
                return Admission(None, ())
            org_key = (room.round_start, room.org_id)
            total_key = (room.round_start, None)
            org_full = self._in_flight[org_key] >= room.org_room
            total_full = self._in_flight[total_key] >= min(room.global_room, self._at_once)
            remaining = deadline - self._monotonic()
            if not (org_full or total_full) or remaining <= 0:
                self._in_flight[org_key] += 1
                self._in_flight[total_key] += 1
                self._wake_first(woken_in)
                return Admission(self, (org_key, total_key))
            queue_key = org_key if org_full else total_key
            if woken_in is not None and woken_in != queue_key:
                self._wake_first(woken_in)
            again = woken_in == queue_key
            woken_in = await self._wait_in(queue_key, first=again, remaining=remaining)

    async def _wait_in(self, key: _Key, *, first: bool, remaining: float) -> _Key | None:
        """Wait in `key`'s queue (at its head when it was woken from it and must wait again);
        the queue it was woken from, or None after the wait ran out."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue = self._waiting.setdefault(key, deque())
        if first:
            queue.appendleft(waiter)
        else:
            queue.append(waiter)
        try:
            await asyncio.wait({waiter}, timeout=remaining)
        except BaseException:
            if waiter.done():
                self._wake_first(key)  # woken, then cancelled: the turn is not lost
            else:
                waiter.cancel()
                self._drop(key, waiter)
            raise
        if not waiter.done():
            waiter.cancel()
            self._drop(key, waiter)
            return None
        return key

    def _drop(self, key: _Key, waiter: asyncio.Future[None]) -> None:
        queue = self._waiting.get(key)
        if queue is None:
            return
        with contextlib.suppress(ValueError):
            queue.remove(waiter)
        if not queue:
            del self._waiting[key]

    def _wake_first(self, key: _Key | None) -> None:
        if key is None:
            return
        queue = self._waiting.get(key)
        while queue:
            waiter = queue.popleft()
            if not waiter.done():
                waiter.set_result(None)
                break
        if queue is not None and not queue:
            del self._waiting[key]

    def _finished(self, keys: tuple[_Key, ...]) -> None:
        for key in keys:
            self._in_flight[key] -= 1
            if self._in_flight[key] <= 0:
                del self._in_flight[key]
            self._wake_first(key)
