"""The herd's bursts answered from memory: a round remembered full until it ends, a slot's facts
warmed up in one statement — and neither lets a brake, a revoked credential or the next round
through.

Where a test must prove that an answer came from memory, it changes the database behind the
memory's back in a table the change feed does not follow (a round's counter): the database
would answer otherwise.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from uuid import UUID

import httpx
import psycopg
import pytest

from control_plane.accounts.credentials import secret_sha256
from control_plane.answers_cache import AnswerMemory, Changes
from control_plane.answers_cache.feed import ChangeFeed
from control_plane.answers_cache.warm_up import SlotWarmUp
from control_plane.claims.caps import round_start
from control_plane.claims.decision import ClaimFacts
from control_plane.claims.due_facts import due_facts, facts_key
from control_plane.claims.refusals import RefusalRecorder
from control_plane.claims.services import ClaimService
from control_plane.errors import ClaimRefused
from control_plane.events.trail import Actor
from control_plane.pins.holds import ActiveHold
from control_plane.registry import Services
from control_plane.types import Pool
from ground.contract import CLAIMS_PATH, DEFAULT_TRACK
from tests.control_plane.answers_cache.conftest import Ticks
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease
from tests.control_plane.lock_waits import wait_for_a_lock_wait
from tests.worlds.clocks import ManualClock

SLOT = "2026-11-30T03:00"
OPERATOR = Actor(kind="operator", name="tests")
IN_THE_WINDOW = datetime(2026, 11, 30, 2, 1, 15, tzinfo=UTC)
ANY_ORG = UUID(int=1)  # for the round's total, which is the same whatever the organisation


def _claim(api: Api, agent: Agent, slot_key: str = SLOT) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        return client.post(CLAIMS_PATH, json={"slot_key": slot_key, "from_version": "1.4.1"})


def _code(answer: httpx.Response) -> tuple[int, str]:
    return answer.status_code, answer.json()["detail"]["code"]


def _unfill_behind_the_memory(database_url: str) -> None:
    """The database would grant again; only a remembered full round refuses."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE claim_rounds_global SET granted = 0")
        conn.execute("UPDATE claim_rounds_org SET granted = 0")


@pytest.fixture
def one_a_round(
    services: Services,
    feed: ChangeFeed,
    clock: ManualClock,
    published: SignedRelease,
) -> None:
    """03:01:15, the platform's cap 1 per round; the feed has read the settings."""
    services.settings.update({"org_cap": 1, "global_cap": 1}, now=clock.now(), actor=OPERATOR)
    clock.set(IN_THE_WINDOW)
    feed.read_once()


@pytest.fixture
def herd(
    one_a_round: None, make_org: Callable[..., Org], make_agent: Callable[..., Agent]
) -> tuple[Agent, Agent, Agent]:
    """Three agents in three organisations, none of them seen by this worker yet."""
    return (
        make_agent(make_org("First")),
        make_agent(make_org("Second")),
        make_agent(make_org("Third")),
    )


def test_a_grant_that_fills_the_round_refuses_the_rest_of_it_from_memory(
    api: Api, database_url: str, herd: tuple[Agent, Agent, Agent]
) -> None:
    first, second, third = herd
    assert _claim(api, first).status_code == 201  # fills the round, warms the slot up
    _unfill_behind_the_memory(database_url)
    # Neither has asked before: the warm-up knew them, the grant's count said "full".
    assert _code(_claim(api, second)) == (429, "global_cap")
    assert _code(_claim(api, third)) == (429, "global_cap")


def test_a_refusal_from_memory_is_freed_once_answered_not_left_to_the_collector(
    api: Api, services: Services, clock: ManualClock, herd: tuple[Agent, Agent, Agent]
) -> None:
    """The herd's refusals are answered by the thousand: each one (and its request with it)
    must go when its answer has, not pile up as cyclic garbage."""
    first, second, _ = herd
    assert _claim(api, first).status_code == 201  # fills the round, warms the slot up
    codes: list[str] = []
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        try:
            services.claims.refuse_from_memory(
                secret_sha256(second.agent_key), SLOT, "1.4.1", clock.now(), track=DEFAULT_TRACK
            )
        except ClaimRefused as refused:
            codes.append(str(refused.refusal))
        gc.collect()
        left = [found for found in gc.garbage if isinstance(found, ClaimRefused)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert codes == ["global_cap"]
    assert left == []


def test_a_round_remembered_full_does_not_refuse_in_the_next_round(
    api: Api, clock: ManualClock, herd: tuple[Agent, Agent, Agent]
) -> None:
    first, second, _ = herd
    assert _claim(api, first).status_code == 201
    assert _code(_claim(api, second)) == (429, "global_cap")
    clock.set(IN_THE_WINDOW + timedelta(minutes=1))
    assert _claim(api, second).status_code == 201


def test_a_brake_engaged_after_the_round_was_remembered_full_is_answered_once_the_feed_is_read(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    clock: ManualClock,
    herd: tuple[Agent, Agent, Agent],
) -> None:
    first, second, _ = herd
    assert _claim(api, first).status_code == 201
    assert _code(_claim(api, second)) == (429, "global_cap")
    services.brake.set(
        engaged=True,
        reason="1.5.0 breaks TLS",
        revoke_outstanding=True,
        actor=OPERATOR,
        now=clock.now(),
    )
    feed.read_once()
    assert _code(_claim(api, second)) == (503, "brake")


def test_a_credential_revoked_after_the_warm_up_is_refused_once_the_feed_is_read(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    clock: ManualClock,
    herd: tuple[Agent, Agent, Agent],
) -> None:
    first, second, _ = herd
    assert _claim(api, first).status_code == 201  # the warm-up remembered the second's facts
    (credential,) = services.accounts.list_credentials(agent_id=UUID(second.agent_id)).credentials
    services.accounts.revoke(credential.id, now=clock.now(), actor=OPERATOR)
    feed.read_once()
    assert _claim(api, second).status_code == 401


def test_a_grant_that_finds_the_round_full_remembers_it(
    services: Services,
    database_url: str,
    clock: ManualClock,
    herd: tuple[Agent, Agent, Agent],
) -> None:
    _, second, _ = herd
    this_round = round_start(clock.now())
    refused: list[BaseException] = []

    def claim() -> None:
        try:
            services.claims.claim_slot(UUID(second.agent_id), SLOT, "1.4.1", clock.now())
        except ClaimRefused as exc:
            refused.append(exc)

    # Another replica's grant is in flight: this claim's read sees room, its counter UPDATE
    # (granted < cap) waits for that grant and then finds none. That is the fact to remember.
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO claim_rounds_global (round_start, granted) VALUES (%s, 0)", [this_round]
        )
    with psycopg.connect(database_url) as other_grant:
        other_grant.execute("UPDATE claim_rounds_global SET granted = 1")
        claiming = threading.Thread(target=claim)
        claiming.start()
        wait_for_a_lock_wait(database_url)
        # The round's total (the second element) is what its read saw.
        assert services.answers.granted_in_round(this_round, ANY_ORG)[1] == 0
        other_grant.commit()
        claiming.join()
    assert [str(exc.refusal) for exc in refused if isinstance(exc, ClaimRefused)] == ["global_cap"]
    assert services.answers.granted_in_round(this_round, ANY_ORG)[1] == 1


def test_the_warm_up_remembers_what_the_agents_own_read_would(
    services: Services,
    pool: Pool,
    database_url: str,
    clock: ManualClock,
    herd: tuple[Agent, Agent, Agent],
) -> None:
    first, second, _ = herd
    key = facts_key(secret_sha256(second.agent_key), SLOT, DEFAULT_TRACK)
    assert _claim_refused_by_database(services, first, second, clock)
    read_by_itself = services.answers.recall(key, now=clock.now())
    assert isinstance(read_by_itself, ClaimFacts)
    services.answers.apply(Changes(everything=True))  # forget it all, then warm up
    with pool.connection() as conn:
        assert (
            SlotWarmUp(services.answers, due_facts).ask(conn, SLOT, IN_THE_WINDOW) == 2
        )  # the first has its run
    assert services.answers.recall(key, now=clock.now()) == read_by_itself


@pytest.mark.parametrize(
    "makes_it_not_due",
    [
        pytest.param("UPDATE credentials SET revoked_at = now() WHERE agent_id = %s", id="revoked"),
        pytest.param(
            "UPDATE agents SET update_schedule_enabled = false WHERE id = %s", id="schedule_off"
        ),
        pytest.param(
            "UPDATE agents SET update_schedule_times = '[\"04:00\"]' WHERE id = %s",
            id="not_at_that_time",
        ),
        pytest.param(
            "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, created_at)"
            " SELECT id, org_id, 'schedule', '2026-11-30T03:00', '2026-11-30T02:00Z',"
            " 'up_to_date', now() FROM agents WHERE id = %s",
            id="slot_already_consumed",
        ),
        pytest.param(
            "INSERT INTO holds (agent_id, until, set_by, set_at)"
            " VALUES (%s, '2026-12-07T00:00Z', 'customer', '2026-11-29T00:00Z')",
            id="held",
        ),
    ],
)
def test_the_warm_up_leaves_out_an_agent_it_must_not_answer_for(
    services: Services,
    pool: Pool,
    database_url: str,
    herd: tuple[Agent, Agent, Agent],
    makes_it_not_due: str,
) -> None:
    _, second, _ = herd
    key = facts_key(secret_sha256(second.agent_key), SLOT, DEFAULT_TRACK)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(makes_it_not_due, [second.agent_id])
    services.answers.apply(Changes(everything=True))
    with pool.connection() as conn:
        assert SlotWarmUp(services.answers, due_facts).ask(conn, SLOT, IN_THE_WINDOW) == 2
    assert services.answers.recall(key) is None


def test_a_claim_refused_before_the_slot_check_warms_nothing_up(
    api: Api, services: Services, herd: tuple[Agent, Agent, Agent]
) -> None:
    first, second, _ = herd
    # A key that is no slot of this agent: a stranger's made-up keys must cost no warm-up.
    assert _code(_claim(api, first, "2026-11-30T04:00")) == (422, "not_a_slot")
    assert services.answers.size() == 1  # its own read, nobody else's
    assert (
        services.answers.recall(facts_key(secret_sha256(second.agent_key), SLOT, DEFAULT_TRACK))
        is None
    )


def test_a_slot_is_warmed_up_once_per_epoch_and_not_again_within_the_interval(
    services: Services, pool: Pool, ticks: Ticks, herd: tuple[Agent, Agent, Agent]
) -> None:
    warm_up = SlotWarmUp(services.answers, due_facts, every_seconds=1.0, monotonic=ticks)
    with pool.connection() as conn:
        assert warm_up.ask(conn, SLOT, IN_THE_WINDOW) == 3
        assert warm_up.ask(conn, SLOT, IN_THE_WINDOW) == 0  # warm in this epoch
        services.answers.apply(Changes(everything=True), read_started=ticks.now)
        assert warm_up.ask(conn, SLOT, IN_THE_WINDOW) == 0  # a new epoch, but within the interval
        ticks.now += 1.5
        services.answers.apply(Changes(), read_started=ticks.now)
        assert warm_up.ask(conn, SLOT, IN_THE_WINDOW) == 3  # past the interval, in the new epoch


def test_a_memory_that_is_not_live_is_not_warmed_up(
    services: Services, pool: Pool, herd: tuple[Agent, Agent, Agent]
) -> None:
    services.answers.lapse()
    with pool.connection() as conn:
        assert SlotWarmUp(services.answers, due_facts).ask(conn, SLOT, IN_THE_WINDOW) == 0
    assert services.answers.size() == 0


def _claim_refused_by_database(
    services: Services, first: Agent, second: Agent, clock: ManualClock
) -> bool:
    """The first is granted; the second's own claim is refused by the database, its row kept."""
    services.claims.claim_slot(UUID(first.agent_id), SLOT, "1.4.1", clock.now())
    services.answers.apply(Changes(everything=True))  # forget the grant's warm-up
    try:
        services.claims.claim_slot_as(
            secret_sha256(second.agent_key), SLOT, "1.4.1", clock.now(), track=DEFAULT_TRACK
        )
    except ClaimRefused as refused:
        return str(refused.refusal) == "global_cap"
    return False


class _FullOnceAsked(AnswerMemory):
    """Knows no count when the claim's read is merged, and the round full when asked again:
    as if another request's grant filled it while this one ran its checks."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    def granted_in_round(self, round_start: datetime, org_id: UUID) -> tuple[int, int]:
        self.asked += 1
        return (0, 0) if self.asked == 1 else (0, 1)


def test_a_round_filled_during_the_claims_checks_is_refused_before_its_grant(
    pool: Pool, database_url: str, clock: ManualClock, herd: tuple[Agent, Agent, Agent]
) -> None:
    _, second, _ = herd
    memory = _FullOnceAsked()
    memory.apply(Changes(), read_started=time.monotonic())
    claims = ClaimService(pool, RefusalRecorder(pool), memory=memory)
    with pytest.raises(ClaimRefused) as refused:
        claims.claim_slot(UUID(second.agent_id), SLOT, "1.4.1", clock.now())
    assert str(refused.value.refusal) == "global_cap"
    assert memory.asked == 2
    with psycopg.connect(database_url, autocommit=True) as conn:
        # The database would have granted it: no grant transaction was even begun.
        assert conn.execute("SELECT count(*) FROM claim_rounds_global").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (0,)


def _stop(database_url: str, statement: str, agent: Agent) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(statement, {"agent": agent.agent_id, "at": IN_THE_WINDOW})


@pytest.mark.parametrize(
    ("stops_it", "answer"),
    [
        pytest.param(
            "INSERT INTO holds (agent_id, until, set_by, set_at)"
            " VALUES (%(agent)s, %(at)s + interval '1 day', 'customer', %(at)s)",
            (409, "held"),
            id="held",
        ),
        pytest.param(
            "INSERT INTO release_halts (release_id, cause, reason, halted_by, halted_at)"
            " SELECT id, 'operator', 'looks wrong', 'tests', %(at)s FROM releases"
            " WHERE %(agent)s::uuid IS NOT NULL",
            (409, "release_halted"),
            id="halted",
        ),
    ],
)
def test_what_stops_an_agent_comes_before_a_round_remembered_full(
    api: Api,
    database_url: str,
    feed: ChangeFeed,
    herd: tuple[Agent, Agent, Agent],
    stops_it: str,
    answer: tuple[int, str],
) -> None:
    first, second, _ = herd
    assert _claim(api, first).status_code == 201
    assert _code(_claim(api, second)) == (429, "global_cap")  # from memory
    _stop(database_url, stops_it, second)
    feed.read_once()
    assert _code(_claim(api, second)) == answer
    # The slot is consumed by a run that says why (the database path writes it, never memory).
    with psycopg.connect(database_url) as conn:
        run = conn.execute(
            "SELECT coalesce(miss_reason, skip_reason) FROM runs"
            " WHERE agent_id = %s AND slot_key = %s",
            [second.agent_id, SLOT],
        ).fetchone()
    assert run == (answer[1],)


def test_the_memory_leaves_a_refusal_that_writes_the_slots_run_to_the_database(
    services: Services, pool: Pool, clock: ManualClock, herd: tuple[Agent, Agent, Agent]
) -> None:
    _, second, _ = herd
    secret = secret_sha256(second.agent_key)
    key = facts_key(secret, SLOT, DEFAULT_TRACK)
    with pool.connection() as conn:
        assert SlotWarmUp(services.answers, due_facts).ask(conn, SLOT, IN_THE_WINDOW) == 3
    warmed = services.answers.recall(key, now=clock.now())
    assert isinstance(warmed, ClaimFacts)
    # Facts that say "held" (as a read racing the hold's write could have left them).
    hold = ActiveHold(until=IN_THE_WINDOW + timedelta(days=1), reason=None, set_by="customer")
    stamp = services.answers.stamp()
    held = replace(warmed, hold=hold)
    assert services.answers.remember(
        key, held, agent_id=held.agent_id, org_id=held.org_id, stamp=stamp
    )
    known = services.claims.refuse_from_memory(
        secret, SLOT, "1.4.1", clock.now(), track=DEFAULT_TRACK
    )
    assert known is None  # not refused here: the database path refuses it and writes the run


def test_the_memory_refuses_the_window_s_last_minute_as_the_database_does(
    services: Services, pool: Pool, herd: tuple[Agent, Agent, Agent]
) -> None:
    _, second, _ = herd
    credential = secret_sha256(second.agent_key)
    with pool.connection() as conn:
        assert SlotWarmUp(services.answers, due_facts).ask(conn, SLOT, IN_THE_WINDOW) == 3
    before_the_margin = datetime(2026, 11, 30, 2, 13, 59, tzinfo=UTC)
    room = services.claims.refuse_from_memory(
        credential, SLOT, "1.4.1", before_the_margin, track=DEFAULT_TRACK
    )
    assert room is not None  # nothing refused: the database decides
    in_the_margin = datetime(2026, 11, 30, 2, 14, 30, tzinfo=UTC)
    with pytest.raises(ClaimRefused) as from_memory:
        services.claims.refuse_from_memory(
            credential, SLOT, "1.4.1", in_the_margin, track=DEFAULT_TRACK
        )
    with pytest.raises(ClaimRefused) as from_database:
        services.claims.claim_slot_as(credential, SLOT, "1.4.1", in_the_margin, track=DEFAULT_TRACK)
    assert (from_memory.value.refusal, str(from_memory.value)) == (
        from_database.value.refusal,
        str(from_database.value),
    )
    assert str(from_memory.value.refusal) == "window_closed"
    assert "no token is granted in its last 60 s" in str(from_memory.value)
