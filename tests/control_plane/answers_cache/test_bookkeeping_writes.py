"""The writes that every worker of every replica makes in batches — the sightings of answers
given from memory, the claim refusals' facts — on a real PostgreSQL, two workers at once.

At a fleet's pace two workers' batches name the same agents: every agent's polls and claims reach
every worker. Each batch locks its rows in one order, so two of them never wait for each other in
a circle (in the order each worker had noted them they deadlocked: one waited a second and
failed). And a sightings write that fails does not stop the memory answering: the feed's read
had already made it exact.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from uuid import UUID

import psycopg
import pytest
from psycopg.rows import dict_row

from control_plane.answers_cache.feed import ChangeFeed
from control_plane.answers_cache.seen import SeenRecorder
from control_plane.claims.refusals import RefusalRecorder
from control_plane.database import open_pool
from control_plane.poll_word import PollWord
from control_plane.registry import Services
from control_plane.types import Pool
from ground.contract import RefusalCode
from tests.control_plane.conftest import Agent, Org

AT = datetime(2026, 11, 30, 2, 3, tzinfo=UTC)
SLOT_KEY = "2026-11-30T03:00"
# Long enough that two writers interleave row by row when their orders differ.
ROW_PAUSE_SECONDS = 0.3


@pytest.fixture
def agents(make_org: Callable[..., Org], make_agent: Callable[..., Agent]) -> list[UUID]:
    org = make_org()
    return sorted(UUID(make_agent(org, f"web-{n:02d}").agent_id) for n in range(2))


@pytest.fixture
def as_on_a_large_fleet(database_url: str) -> str:
    """The test's database, its joins planned as on a fleet's tables: a small batch drives a
    nested loop over the agents' index, so rows are reached in the batch's own order (on a test's
    tiny tables the planner hashes the batch and scans the table, which reaches them in the
    table's order whatever the batch's). For connections opened from now on."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        name = conn.info.dbname
        conn.execute(f'ALTER DATABASE "{name}" SET enable_hashjoin = off')
        conn.execute(f'ALTER DATABASE "{name}" SET enable_mergejoin = off')
    return database_url


def _write(database_url: str, recorder: SeenRecorder) -> Callable[[], int]:
    def run() -> int:
        with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as conn:
            return recorder.write(conn)

    return run


@contextmanager
def pause_at_each_row(database_url: str, table: str, event: str) -> Iterator[None]:
    """A trigger that sleeps before each row `event` on `table`: a writer then holds the rows
    it has locked while it reaches for the next one, as a large batch on a busy database does."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION test_pause() RETURNS trigger LANGUAGE plpgsql AS"
            f" $$ BEGIN PERFORM pg_sleep({ROW_PAUSE_SECONDS}); RETURN NEW; END $$"
        )
        conn.execute(
            f"CREATE TRIGGER test_pause BEFORE {event} ON {table}"
            " FOR EACH ROW EXECUTE FUNCTION test_pause()"
        )
        try:
            yield
        finally:
            conn.execute(f"DROP TRIGGER test_pause ON {table}")
            conn.execute("DROP FUNCTION test_pause()")


def _at_once(*writes: Callable[[], object]) -> list[BaseException]:
    """Run the writes in threads started together; the exceptions they raised."""
    failures: list[BaseException] = []
    start = threading.Barrier(len(writes))

    def run(write: Callable[[], object]) -> None:
        start.wait()
        try:
            write()
        except BaseException as failed:
            failures.append(failed)

    threads = [threading.Thread(target=run, args=(write,)) for write in writes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return failures


def _seen_at(pool: Pool, agents: list[UUID]) -> list[datetime | None]:
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT id, last_seen_at FROM agents WHERE id = ANY(%s) ORDER BY id", [agents]
        ).fetchall()
    return [row["last_seen_at"] for row in rows]


def test_two_workers_sightings_of_the_same_agents_do_not_deadlock(
    pool: Pool, as_on_a_large_fleet: str, agents: list[UUID]
) -> None:
    database_url = as_on_a_large_fleet
    first, second = (
        SeenRecorder(
            resolution=timedelta(seconds=30),
            host_every=timedelta(minutes=5),
            stretch_gap=timedelta(minutes=3),
        )
        for _ in range(2)
    )
    # The same two agents and hosts, noted in opposite orders by the two workers.
    for agent_id in agents:
        first.saw(agent_id, AT, PollWord(host_id="host-aaaa"))
    for agent_id in reversed(agents):
        second.saw(agent_id, AT + timedelta(seconds=1), PollWord(host_id="host-aaaa"))

    with pause_at_each_row(database_url, "agents", "UPDATE"):
        failures = _at_once(_write(database_url, first), _write(database_url, second))
    assert failures == []
    # One of the two stamps per agent (the second finds the first's within the resolution).
    assert all(
        seen is not None and AT <= seen <= AT + timedelta(seconds=1)
        for seen in _seen_at(pool, agents)
    )
    with pool.connection() as conn:
        hosts = conn.execute(
            "SELECT count(*) AS n FROM agent_hosts WHERE agent_id = ANY(%s)", [agents]
        ).fetchone()
    assert hosts is not None and hosts["n"] == 2


def test_two_workers_hosts_of_the_same_agents_do_not_deadlock(
    pool: Pool, as_on_a_large_fleet: str, agents: list[UUID]
) -> None:
    database_url = as_on_a_large_fleet
    first, second = (
        SeenRecorder(
            resolution=timedelta(seconds=30),
            host_every=timedelta(minutes=5),
            stretch_gap=timedelta(minutes=3),
        )
        for _ in range(2)
    )
    for agent_id in agents:
        first.saw(agent_id, AT, PollWord(host_id="host-aaaa"))
    for agent_id in reversed(agents):
        second.saw(agent_id, AT, PollWord(host_id="host-aaaa"))
    # Stamped already: only the hosts are written, each an upsert.
    with pool.connection() as conn:
        conn.execute("UPDATE agents SET last_seen_at = %s WHERE id = ANY(%s)", [AT, agents])

    with pause_at_each_row(database_url, "agent_hosts", "INSERT"):
        failures = _at_once(_write(database_url, first), _write(database_url, second))
    assert failures == []


def test_two_workers_refusal_facts_of_the_same_agents_do_not_deadlock(
    pool: Pool, as_on_a_large_fleet: str, agents: list[UUID]
) -> None:
    database_url = as_on_a_large_fleet
    workers_pool = open_pool(database_url, min_size=2, max_size=2)
    first, second = RefusalRecorder(workers_pool), RefusalRecorder(workers_pool)
    for agent_id in agents:
        first.record(agent_id, SLOT_KEY, RefusalCode.GLOBAL_CAP, AT)
    for agent_id in reversed(agents):
        second.record(agent_id, SLOT_KEY, RefusalCode.GLOBAL_CAP, AT)
    try:
        with pause_at_each_row(database_url, "claim_refusals", "INSERT"):
            failures = _at_once(first.flush, second.flush)
    finally:
        workers_pool.close()
    assert failures == []
    with pool.connection() as conn:
        facts = conn.execute(
            "SELECT count(*) AS n FROM claim_refusals WHERE agent_id = ANY(%s)", [agents]
        ).fetchone()
    assert facts is not None and facts["n"] == 2
    assert first.pending() == second.pending() == 0


def test_a_sightings_write_that_fails_leaves_the_memory_answering(
    database_url: str, services: Services, feed: ChangeFeed, agents: list[UUID], pool: Pool
) -> None:
    """The feed's connection gives up on a statement after a second; another transaction holds
    the agent's row longer. The sighting is kept and written by a later read, and meanwhile the
    memory keeps answering (it was read, so it is exact)."""
    agent_id = agents[0]
    services.seen.saw(agent_id, AT)
    with psycopg.connect(database_url) as holder:
        holder.execute("SELECT 1 FROM agents WHERE id = %s FOR UPDATE", [agent_id])
        feed.read_once()
        assert services.answers.live
        assert services.seen.pending() == 1
        holder.rollback()
    feed.read_once()
    assert services.answers.live
    assert services.seen.pending() == 0
    assert _seen_at(pool, [agent_id]) == [AT]


def test_a_feed_read_that_fails_still_stops_the_memory_answering(
    database_url: str, services: Services, feed: ChangeFeed
) -> None:
    """The guard above is only for the writes after a read: a read that fails (here its
    statement is cancelled by a lock on the feed's table) still makes the memory lapse."""
    with psycopg.connect(database_url) as holder:
        holder.execute("LOCK TABLE answer_changes IN ACCESS EXCLUSIVE MODE")
        feed.read_once()
        assert not services.answers.live
        holder.rollback()
    feed.read_once()
    assert services.answers.live
