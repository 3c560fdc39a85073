"""Claims that wait for the grants already in flight in their worker (`answers_cache.in_flight`).

Unit tests of the waiting itself, in a real event loop, with `known_room` standing in for the
memory: what the worker knows changes between the steps exactly as a grant's answer would change
it. The same waiting over the real routes and database is in `test_claims_waiting.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from uuid import UUID, uuid4

import pytest

from control_plane.answers_cache.in_flight import Admission, GrantsInFlight, KnownRoom
from control_plane.errors import ClaimRefused
from ground.contract import RefusalCode

ROUND = datetime(2026, 11, 30, 2, 1, tzinfo=UTC)
ORG_A = uuid4()
ORG_B = uuid4()


class Knowledge:
    """What the worker knows of the round: the room left per cap, or the round full."""

    def __init__(self, *, org_room: int = 5, global_room: int = 25) -> None:
        self.org_room = org_room
        self.global_room = global_room
        self.full = False
        self.asked = 0

    def of(self, org_id: UUID) -> Callable[[], KnownRoom | None]:
        def known_room() -> KnownRoom | None:
            self.asked += 1
            if self.full:
                raise ClaimRefused(RefusalCode.GLOBAL_CAP, "the platform's updates are taken")
            return KnownRoom(
                round_start=ROUND,
                org_id=org_id,
                org_room=self.org_room,
                global_room=self.global_room,
            )

        return known_room


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_claim_beyond_the_grants_at_once_waits_until_one_finishes() -> None:
    async def scenario() -> None:
        grants = GrantsInFlight(at_once=2)
        known = Knowledge()
        first = await grants.admit(known.of(ORG_A))
        await grants.admit(known.of(ORG_B))
        third = asyncio.create_task(grants.admit(known.of(ORG_B)))
        await _settle()
        assert not third.done()
        assert grants.waiting() == 1
        first.finish()
        admitted = await third
        assert isinstance(admitted, Admission)
        assert grants.in_flight(ROUND, None) == 2

    asyncio.run(scenario())


def test_a_waiting_claim_goes_to_the_database_when_the_grant_in_flight_failed() -> None:
    # The room this worker knows of is one grant: a second claim waits; the grant ahead of it
    # fails (say its agent is held) and the count is unchanged, so the waiting claim goes on.
    async def scenario() -> None:
        grants = GrantsInFlight()
        known = Knowledge(global_room=1)
        ahead = await grants.admit(known.of(ORG_A))
        waiting = asyncio.create_task(grants.admit(known.of(ORG_B)))
        await _settle()
        assert not waiting.done()
        ahead.finish()
        await waiting
        assert grants.in_flight(ROUND, ORG_B) == 1

    asyncio.run(scenario())


def test_the_waiting_claims_are_refused_from_memory_when_the_grant_ahead_filled_the_round() -> None:
    async def scenario() -> None:
        grants = GrantsInFlight()
        known = Knowledge(global_room=1)
        ahead = await grants.admit(known.of(ORG_A))
        waiting = [asyncio.create_task(grants.admit(known.of(ORG_B))) for _ in range(50)]
        await _settle()
        assert grants.waiting() == 50
        known.full = True  # the grant's counter UPDATE said the round is full
        asked_before = known.asked
        ahead.finish()
        answers = await asyncio.gather(*waiting, return_exceptions=True)
        assert all(isinstance(answer, ClaimRefused) for answer in answers)
        # Each waiting claim asked the memory once more, not once per wake-up of another.
        assert known.asked - asked_before == 50
        assert grants.waiting() == 0
        assert grants.in_flight(ROUND, None) == 0

    asyncio.run(scenario())


def test_an_organisation_with_its_room_in_flight_does_not_hold_another_organisations_claim() -> (
    None
):
    async def scenario() -> None:
        grants = GrantsInFlight()
        known = Knowledge(org_room=1)
        await grants.admit(known.of(ORG_A))
        held = asyncio.create_task(grants.admit(known.of(ORG_A)))
        await _settle()
        assert not held.done()
        await grants.admit(known.of(ORG_B))  # not behind organisation A's queue
        held.cancel()

    asyncio.run(scenario())


def test_a_claim_whose_facts_are_unknown_goes_at_once_and_is_not_counted() -> None:
    async def scenario() -> None:
        grants = GrantsInFlight(at_once=1)
        known = Knowledge()
        await grants.admit(known.of(ORG_A))
        admitted = await grants.admit(lambda: None)
        admitted.finish()
        assert grants.in_flight(ROUND, None) == 1

    asyncio.run(scenario())


def test_a_claim_waits_no_longer_than_the_bound_then_goes_to_the_database() -> None:
    async def scenario() -> None:
        grants = GrantsInFlight(at_once=1, max_wait_seconds=0.01)
        known = Knowledge()
        await grants.admit(known.of(ORG_A))  # never finishes: a stalled database
        await asyncio.wait_for(grants.admit(known.of(ORG_B)), timeout=10)
        assert grants.in_flight(ROUND, None) == 2
        assert grants.waiting() == 0

    asyncio.run(scenario())


def test_a_woken_claim_that_is_cancelled_passes_its_turn_on() -> None:
    # A client that hangs up just as its turn comes must not leave the queue behind it waiting.
    async def scenario() -> None:
        grants = GrantsInFlight(at_once=1)
        known = Knowledge()
        ahead = await grants.admit(known.of(ORG_A))
        first = asyncio.create_task(grants.admit(known.of(ORG_B)))
        second = asyncio.create_task(grants.admit(known.of(ORG_B)))
        await _settle()
        ahead.finish()  # wakes `first` …
        first.cancel()  # … which goes away before it runs
        with pytest.raises(asyncio.CancelledError):
            await first
        await asyncio.wait_for(second, timeout=10)

    asyncio.run(scenario())


def test_finishing_twice_counts_once() -> None:
    async def scenario() -> None:
        grants = GrantsInFlight()
        known = Knowledge()
        admitted = await grants.admit(known.of(ORG_A))
        await grants.admit(known.of(ORG_A))
        admitted.finish()
        admitted.finish()
        assert grants.in_flight(ROUND, ORG_A) == 1

    asyncio.run(scenario())
