"""The grant's two counter UPDATEs in one call (`count_claim_grant`, migration 0012, sent with
the COMMIT), and its other statements sent together (pipeline mode): the caps stay exact, a cap
found full rolls the whole grant back, and the platform's counter is not touched when the
organisation's found no room.

Each case holds a counter row in another transaction — another replica's grant in flight — so
that the claim's read sees room and only its counter UPDATE, after that grant commits, finds the
cap full: the input the statement's `granted < cap` and its ordering exist for.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from uuid import UUID

import psycopg
import pytest

from control_plane.claims.caps import Caps, round_start
from control_plane.claims.grant import ScheduledGrant, grant_token
from control_plane.claims.services import Claim
from control_plane.errors import ClaimRefused
from control_plane.registry import Services
from control_plane.types import Connection, Pool
from ground.contract import DEFAULT_TRACK, ClaimGrant
from tests.control_plane.conftest import Agent, Org, SignedRelease
from tests.control_plane.lock_waits import lock_waits, wait_for_a_lock_wait
from tests.worlds.clocks import ManualClock
from tests.worlds.waiting import wait_until

SLOT = "2026-11-30T03:00"
IN_THE_WINDOW = datetime(2026, 11, 30, 2, 1, 15, tzinfo=UTC)
SLOT_AT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)  # 03:00 CET


@pytest.fixture
def agent(
    clock: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> Agent:
    clock.set(IN_THE_WINDOW)
    return make_agent(make_org("Herd"))


@pytest.fixture
def counters(database_url: str, agent: Agent) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """This round's counter rows (org 4 of 5, platform 24 of 25), and a connection for the other
    grant's transaction."""
    this_round = round_start(IN_THE_WINDOW)
    with psycopg.connect(database_url, autocommit=True) as setup:
        setup.execute(
            "INSERT INTO claim_rounds_org (round_start, org_id, granted) VALUES (%s, %s, 4)",
            [this_round, agent.org_id],
        )
        setup.execute(
            "INSERT INTO claim_rounds_global (round_start, granted) VALUES (%s, 24)", [this_round]
        )
    with psycopg.connect(database_url) as other_grant:
        yield other_grant


def _claim_behind(
    services: Services,
    database_url: str,
    agent: Agent,
    other_grant: psycopg.Connection[tuple[object, ...]],
    *,
    platform_held_by: psycopg.Connection[tuple[object, ...]] | None = None,
) -> tuple[list[Claim | ClaimRefused], bool]:
    """Claim while `other_grant` holds a counter row; let it commit once the claim waits. With
    `platform_held_by` holding the platform's row until the claim has answered or waits again:
    whether the claim waited for it."""
    answers: list[Claim | ClaimRefused] = []

    def claim() -> None:
        try:
            answers.append(
                services.claims.claim_slot(UUID(agent.agent_id), SLOT, "1.4.1", IN_THE_WINDOW)
            )
        except ClaimRefused as refused:
            answers.append(refused)

    claiming = threading.Thread(target=claim)
    claiming.start()
    wait_for_a_lock_wait(database_url)
    other_grant.commit()
    waited_for_the_platform = False
    if platform_held_by is not None:
        wait_until(
            lambda: not claiming.is_alive() or lock_waits(database_url) > 0,
            what="the claim to end or to wait for the platform's counter",
            interval=0.01,
        )
        waited_for_the_platform = claiming.is_alive()
        platform_held_by.rollback()
    claiming.join()
    return answers, waited_for_the_platform


def _counts(database_url: str) -> tuple[object, ...]:
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT (SELECT granted FROM claim_rounds_org),"
            " (SELECT granted FROM claim_rounds_global),"
            " (SELECT count(*) FROM runs), (SELECT count(*) FROM tokens)"
        ).fetchone()
    assert row is not None
    return tuple(row)


def test_an_organisation_found_full_neither_counts_nor_waits_for_the_platform(
    services: Services,
    database_url: str,
    agent: Agent,
    counters: psycopg.Connection[tuple[object, ...]],
) -> None:
    counters.execute("UPDATE claim_rounds_org SET granted = 5")
    with psycopg.connect(database_url) as platform_holder:
        # A third grant holds the platform's row: a grant that has no room in its organisation
        # must not queue for it (nor lock it for the others).
        platform_holder.execute("UPDATE claim_rounds_global SET granted = granted")
        answers, waited = _claim_behind(
            services, database_url, agent, counters, platform_held_by=platform_holder
        )
    assert not waited
    assert [str(a.refusal) for a in answers if isinstance(a, ClaimRefused)] == ["org_cap"]
    # The organisation's 5, the platform's 24: no run, no token, no count the grant did not make.
    assert _counts(database_url) == (5, 24, 0, 0)


def test_a_platform_found_full_rolls_back_the_organisations_count_and_the_grant(
    services: Services,
    database_url: str,
    agent: Agent,
    counters: psycopg.Connection[tuple[object, ...]],
) -> None:
    counters.execute("UPDATE claim_rounds_global SET granted = 25")
    answers, _ = _claim_behind(services, database_url, agent, counters)
    assert [str(a.refusal) for a in answers if isinstance(a, ClaimRefused)] == ["global_cap"]
    assert _counts(database_url) == (4, 25, 0, 0)


def test_a_grant_with_room_left_after_the_other_commits_counts_in_both(
    services: Services,
    database_url: str,
    agent: Agent,
    counters: psycopg.Connection[tuple[object, ...]],
) -> None:
    # The other transaction holds the platform's row and ends without taking the last place.
    counters.execute("UPDATE claim_rounds_global SET granted = granted")
    answers, _ = _claim_behind(services, database_url, agent, counters)
    assert [a.created for a in answers if isinstance(a, Claim)] == [True]
    assert _counts(database_url) == (5, 25, 1, 1)


def test_a_grant_queues_at_the_counters_update_not_at_their_creation(
    services: Services,
    database_url: str,
    agent: Agent,
    counters: psycopg.Connection[tuple[object, ...]],
) -> None:
    # An INSERT … ON CONFLICT meeting the row another grant has updated waits for that grant's
    # commit: every later statement of the grant would queue behind it, not only the UPDATE.
    counters.execute("UPDATE claim_rounds_global SET granted = granted")
    answers: list[Claim] = []
    claiming = threading.Thread(
        target=lambda: answers.append(
            services.claims.claim_slot(UUID(agent.agent_id), SLOT, "1.4.1", IN_THE_WINDOW)
        )
    )
    claiming.start()
    wait_for_a_lock_wait(database_url)
    with psycopg.connect(database_url, autocommit=True) as watch:
        waiting = watch.execute(
            "SELECT query FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchall()
    counters.commit()
    claiming.join()
    assert ["count_claim_grant(" in query for (query,) in waiting] == [True]
    assert [claim.created for claim in answers] == [True]


def _idle_in_transaction(database_url: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as watch:
        row = watch.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND state LIKE 'idle in transaction%'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_brake_engaged_during_the_checks_refuses_the_grant_and_leaves_no_transaction_open(
    services: Services,
    database_url: str,
    agent: Agent,
    counters: psycopg.Connection[tuple[object, ...]],
) -> None:
    # The operators' brake, committed while the claim waits for its row (FOR SHARE): the grant
    # sees it engaged, sends ROLLBACK itself, and the pool gets its connection back idle.
    counters.execute("UPDATE platform_brake SET engaged = true, reason = 'tests'")
    answers, _ = _claim_behind(services, database_url, agent, counters)
    assert [str(a.refusal) for a in answers if isinstance(a, ClaimRefused)] == ["brake"]
    assert _counts(database_url) == (4, 24, 0, 0)
    assert _idle_in_transaction(database_url) == 0


def test_a_cap_found_full_leaves_no_transaction_open(
    services: Services,
    database_url: str,
    agent: Agent,
    counters: psycopg.Connection[tuple[object, ...]],
) -> None:
    counters.execute("UPDATE claim_rounds_global SET granted = 25")
    _claim_behind(services, database_url, agent, counters)
    assert _idle_in_transaction(database_url) == 0


def test_the_same_agent_racing_itself_gets_one_claim_twice(
    services: Services,
    database_url: str,
    agent: Agent,
    counters: psycopg.Connection[tuple[object, ...]],
) -> None:
    # The first claim waits at the counters (another grant holds the organisation's row), the
    # second for the first's run (the slot's unique key): the second's insert fails once the
    # first commits, and it answers with the first's claim.
    counters.execute("UPDATE claim_rounds_org SET granted = granted")
    answers: list[Claim] = []

    def claim() -> None:
        answers.append(
            services.claims.claim_slot(UUID(agent.agent_id), SLOT, "1.4.1", IN_THE_WINDOW)
        )

    first = threading.Thread(target=claim)
    first.start()
    wait_for_a_lock_wait(database_url)
    second = threading.Thread(target=claim)
    second.start()
    wait_for_a_lock_wait(database_url, sessions=2)
    counters.commit()
    first.join()
    second.join()
    assert sorted(claim.created for claim in answers) == [False, True]
    assert len({claim.grant.run_id for claim in answers}) == 1
    assert _counts(database_url) == (5, 25, 1, 1)
    assert _idle_in_transaction(database_url) == 0


def _grant_alone(
    conn: Connection, agent: Agent, slot_key: str, *, caps: tuple[int, int]
) -> ClaimGrant:
    """The grant transaction itself on `conn` (the seam: one connection, again and again)."""
    return grant_token(
        conn,
        ScheduledGrant(
            agent_id=UUID(agent.agent_id),
            org_id=UUID(agent.org_id),
            slot_key=slot_key,
            slot_at=SLOT_AT,
            from_version="1.4.1",
            existing_run=None,
            caps=Caps(org_cap=caps[0], global_cap=caps[1]),
            track=DEFAULT_TRACK,
            now=IN_THE_WINDOW,
        ),
    ).grant


def test_a_connection_keeps_granting_after_grants_that_found_a_cap_full(
    services: Services, pool: Pool, agent: Agent, database_url: str
) -> None:
    # A failed statement aborts the rest of the grant's pipeline, the COMMIT included: a
    # statement the driver prepared there (it prepares one after five uses) was never prepared,
    # and the connection's next grant asked for a prepared statement that did not exist (a 500).
    with pool.connection() as conn:
        for n in range(8):
            _grant_alone(conn, agent, f"{SLOT}#{n}", caps=(100, 100))
            with pytest.raises(ClaimRefused):  # the organisation's cap 0: full
                _grant_alone(conn, agent, f"{SLOT}#{n}-full", caps=(0, 100))
    assert _counts(database_url)[2:] == (8, 8)


def test_a_grant_that_failed_for_another_reason_leaves_its_connection_to_be_replaced(
    services: Services,
    pool: Pool,
    agent: Agent,
    counters: psycopg.Connection[tuple[object, ...]],
    database_url: str,
) -> None:
    # Any failure but a full cap may have skipped a statement the driver prepared behind it: the
    # connection is closed, and the pool hands the next grant another one.
    counters.execute(
        "UPDATE claim_rounds_global SET granted = granted WHERE round_start = %s",
        [round_start(IN_THE_WINDOW)],
    )  # the platform's counter row locked by another grant's transaction, left open
    with pool.connection() as conn:
        conn.execute("SET lock_timeout = '100ms'")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            _grant_alone(conn, agent, SLOT, caps=(5, 25))
        assert conn.closed
    counters.rollback()
    claim = services.claims.claim_slot(UUID(agent.agent_id), SLOT, "1.4.1", IN_THE_WINDOW)
    assert claim.created
    assert _counts(database_url) == (5, 25, 1, 1)
    assert _idle_in_transaction(database_url) == 0
