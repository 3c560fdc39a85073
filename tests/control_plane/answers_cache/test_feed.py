"""The change feed on a real PostgreSQL: every write that changes an answer is in it, nothing
that does not, and a transaction that commits late is never skipped."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from uuid import UUID

import psycopg
import pytest

from control_plane.answers_cache import AnswerMemory, Changes
from control_plane.answers_cache.feed import FAILURE_REPEAT_SECONDS, ChangeFeed, read_changes
from control_plane.registry import Services
from tests.control_plane.answers_cache.conftest import Ticks
from tests.control_plane.conftest import Agent, Org
from tests.worlds.waiting import wait_until


@pytest.fixture
def agent(make_org: Callable[..., Org], make_agent: Callable[..., Agent]) -> Agent:
    return make_agent(make_org())


def _changes_after(database_url: str, statement: str, agent: Agent) -> Changes:
    """The change rows `statement` itself appended (a reader may see more: it re-reads every
    transaction still running at its previous read, which other sessions can hold back)."""
    with psycopg.connect(database_url, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
        last = conn.execute("SELECT coalesce(max(id), 0) AS id FROM answer_changes").fetchone()
        conn.execute(statement, {"agent": agent.agent_id})
        rows = conn.execute(
            "SELECT scope, subject FROM answer_changes WHERE id > %s", [last["id"] if last else 0]
        ).fetchall()
    return Changes(
        agents=frozenset(row["subject"] for row in rows if row["scope"] == "agent"),
        orgs=frozenset(row["subject"] for row in rows if row["scope"] == "org"),
        everything=any(row["scope"] == "all" for row in rows),
    )


def test_the_reader_finds_what_a_committed_write_appended(database_url: str, agent: Agent) -> None:
    with psycopg.connect(database_url, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
        horizon, _, _ = read_changes(conn, None)
        conn.execute("UPDATE platform_settings SET org_cap = 2")
        _, changes, _ = read_changes(conn, horizon)
    assert changes.everything


@pytest.mark.parametrize(
    "statement",
    [
        pytest.param(
            "UPDATE credentials SET revoked_at = now() WHERE agent_id = %(agent)s",
            id="credential_revoked",
        ),
        pytest.param(
            "UPDATE agents SET update_schedule_times = '[\"04:00\"]' WHERE id = %(agent)s",
            id="schedule_changed",
        ),
        pytest.param(
            "UPDATE agents SET update_schedule_enabled = false, update_schedule_times = '[]'"
            " WHERE id = %(agent)s",
            id="schedule_off",
        ),
        pytest.param("UPDATE agents SET deleted_at = now() WHERE id = %(agent)s", id="deleted"),
        pytest.param(
            "INSERT INTO runs (agent_id, org_id, trigger, status, created_at)"
            " SELECT id, org_id, 'manual', 'requested', now() FROM agents WHERE id = %(agent)s",
            id="manual_update_requested",
        ),
    ],
)
def test_a_write_about_one_agent_names_that_agent(
    database_url: str, agent: Agent, statement: str
) -> None:
    changes = _changes_after(database_url, statement, agent)
    assert {str(changed) for changed in changes.agents} == {agent.agent_id}
    assert not changes.everything


@pytest.mark.parametrize(
    "statement",
    [
        pytest.param("UPDATE platform_settings SET org_cap = 2", id="settings"),
        pytest.param(
            "UPDATE platform_brake SET engaged = true, reason = 'tests'", id="brake_engaged"
        ),
        pytest.param("UPDATE current_releases SET changed_at = now()", id="current_release"),
        pytest.param("UPDATE releases SET withdrawn_by = withdrawn_by", id="release"),
    ],
)
def test_a_platform_write_changes_everything(
    database_url: str, agent: Agent, statement: str
) -> None:
    assert _changes_after(database_url, statement, agent).everything


@pytest.mark.parametrize(
    "statement",
    [
        pytest.param("UPDATE agents SET last_seen_at = now() WHERE id = %(agent)s", id="seen"),
        # A new stretch of sightings after a gap changes no answer.
        pytest.param(
            "UPDATE agents SET online_since = now(), previous_seen_at = last_seen_at,"
            " last_seen_at = now() WHERE id = %(agent)s",
            id="stretch",
        ),
    ],
)
def test_the_polls_own_sighting_stamps_are_no_change(
    database_url: str, agent: Agent, statement: str
) -> None:
    changes = _changes_after(database_url, statement, agent)
    assert changes.empty


def test_any_other_column_of_the_agent_is_a_change(database_url: str, agent: Agent) -> None:
    changes = _changes_after(
        database_url,
        "UPDATE agents SET online_since = now(), update_schedule_enabled = false"
        " WHERE id = %(agent)s",
        agent,
    )
    assert not changes.empty


def test_a_transaction_that_commits_after_a_later_one_is_not_skipped(
    database_url: str,
    services: Services,
    ticks: Ticks,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    org = make_org()
    slow_agent, fast_agent = make_agent(org, "slow"), make_agent(org, "fast")
    memory = AnswerMemory(monotonic=ticks)
    feed = ChangeFeed(database_url, memory, services.seen, monotonic=ticks)
    feed.read_once()
    with psycopg.connect(database_url) as slow, psycopg.connect(database_url) as fast:
        # The slow transaction writes first (its change row gets the lower id) ...
        slow.execute(
            "UPDATE credentials SET revoked_at = now() WHERE agent_id = %s", [slow_agent.agent_id]
        )
        for agent in (slow_agent, fast_agent):
            memory.remember(
                agent.agent_id,
                "answer",
                agent_id=UUID(agent.agent_id),
                org_id=UUID(org.org_id),
                stamp=memory.stamp(),
            )
        # ... a later one commits first and is read ...
        fast.execute(
            "UPDATE credentials SET revoked_at = now() WHERE agent_id = %s", [fast_agent.agent_id]
        )
        fast.commit()
        feed.read_once()
        assert memory.recall(fast_agent.agent_id) is None
        # (A read may forget more than what changed, never less: remembered again, to be sure
        # the slow transaction's own row is what forgets it below.)
        memory.remember(
            slow_agent.agent_id,
            "answer",
            agent_id=UUID(slow_agent.agent_id),
            org_id=UUID(org.org_id),
            stamp=memory.stamp(),
        )
        assert memory.recall(slow_agent.agent_id) == "answer"
        # ... and the slow one commits after that read: a reader that went by row ids (or by
        # commit order of the ids it had seen) would never look at its row again.
        slow.commit()
    feed.read_once()
    assert memory.recall(slow_agent.agent_id) is None
    feed.stop()


def test_an_open_transaction_elsewhere_on_the_server_does_not_make_reads_forget_again(
    database_url: str, services: Services, ticks: Ticks, agent: Agent
) -> None:
    """A transaction of another database on the same server holds the horizon below a
    platform-wide change: the read after the one that applied it forgets nothing."""
    memory = AnswerMemory(monotonic=ticks)
    feed = ChangeFeed(database_url, memory, services.seen, monotonic=ticks)
    feed.read_once()
    elsewhere = psycopg.conninfo.make_conninfo(database_url, dbname="postgres")
    with psycopg.connect(elsewhere) as long_report:
        long_report.execute("SELECT pg_current_xact_id()")  # holds a transaction id, open
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("UPDATE platform_settings SET org_cap = 2")
        feed.read_once()
        memory.remember(
            "answer",
            "kept",
            agent_id=UUID(agent.agent_id),
            org_id=UUID(agent.org_id),
            stamp=memory.stamp(),
        )
        for _ in range(3):
            ticks.now += 1.0
            feed.read_once()
        assert memory.recall("answer") == "kept"
        # A change that commits now, above the held horizon, is still read.
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("UPDATE platform_brake SET engaged = true, reason = 'tests'")
        feed.read_once()
        assert memory.recall("answer") is None
    feed.stop()


def test_rows_every_worker_has_read_are_pruned(
    database_url: str, services: Services, ticks: Ticks, agent: Agent
) -> None:
    feed = ChangeFeed(database_url, AnswerMemory(monotonic=ticks), services.seen, monotonic=ticks)
    feed.read_once()
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE platform_settings SET org_cap = 2")
        # Until every transaction older than the change has ended (another session's, such as
        # a `CREATE DATABASE` of the test suite), no horizon is above it: wait, with a deadline.
        wait_until(
            lambda: (
                conn.execute(
                    "SELECT pg_snapshot_xmin(pg_current_snapshot()) > max(xid) FROM answer_changes"
                ).fetchone()
                == (True,)
            ),
            what="every transaction older than the change to end",
            timeout=60,
        )
        for _ in range(3):  # each read within the freshness bound, until the prune age passes
            ticks.now += 1.0
            feed.read_once()
        assert conn.execute("SELECT count(*) FROM answer_changes").fetchone() != (0,)
        # Pruned below a horizon at least a minute old, at most once a minute: within two.
        for _ in range(2 * 60 + 5):
            ticks.now += 1.0
            feed.read_once()
        assert conn.execute("SELECT count(*) FROM answer_changes").fetchone() == (0,)
    feed.stop()


def test_sightings_that_cannot_be_written_are_said_once_a_minute_and_when_written_again(
    database_url: str,
    services: Services,
    ticks: Ticks,
    agent: Agent,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A lock held by hand on the agent's row fails the sightings' batch at every read (twice a
    second): one line, not two a second, until it is written."""
    caplog.set_level(logging.WARNING, "control_plane.answers_cache.feed")
    feed = ChangeFeed(database_url, AnswerMemory(monotonic=ticks), services.seen, monotonic=ticks)
    feed.read_once()

    def said() -> list[str]:
        return [
            record.getMessage() for record in caplog.records if "sightings" in record.getMessage()
        ]

    with psycopg.connect(database_url) as operator:
        operator.execute("SELECT id FROM agents WHERE id = %s FOR UPDATE", [agent.agent_id])
        for _ in range(5):  # the feed's own statement bound cuts each wait
            services.seen.saw(UUID(agent.agent_id), datetime.now(UTC))
            feed.read_once()
            ticks.now += 0.5
        assert len(said()) == 1, said()
        assert "not written yet" in said()[0]
        ticks.now += FAILURE_REPEAT_SECONDS
        feed.read_once()
        assert len(said()) == 2 and "not written yet after 62 s" in said()[1], said()
        operator.rollback()
    feed.read_once()
    assert said()[-1] == "sightings of answers from memory written again after 62 s"
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT last_seen_at FROM agents WHERE id = %s", [agent.agent_id]
        ).fetchone()
    assert row is not None and row[0] is not None  # kept for the next read, then written
    feed.stop()
