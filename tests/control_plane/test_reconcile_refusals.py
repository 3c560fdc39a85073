"""The refusal recorder: the claim endpoint's refusals become facts for the miss reasons without a
write per refusal — an in-memory, de-duplicated buffer flushed in batches."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from uuid import UUID, uuid4

import psycopg
import pytest

from control_plane.claims.refusals import REPEAT_SECONDS, RefusalRecorder
from control_plane.database import SessionBounds, open_pool
from control_plane.types import Pool
from ground.contract import RefusalCode
from tests.control_plane.reconcile_fleet import NIGHT_KEY

AT = datetime(2026, 11, 30, 2, 3, tzinfo=UTC)


@pytest.fixture
def agent_id(pool: Pool) -> UUID:
    with pool.connection() as conn:
        org = conn.execute("INSERT INTO orgs (name) VALUES ('Acme') RETURNING id").fetchone()
        assert org is not None
        row = conn.execute(
            "INSERT INTO agents (org_id, name) VALUES (%s, 'web-01') RETURNING id", [org["id"]]
        ).fetchone()
    assert row is not None
    found: UUID = row["id"]
    return found


def _facts(pool: Pool) -> list[tuple[str, str]]:
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT slot_key, reason FROM claim_refusals ORDER BY slot_key, reason"
        ).fetchall()
    return [(row["slot_key"], row["reason"]) for row in rows]


def test_a_refusal_writes_nothing_until_the_flush(pool: Pool, agent_id: UUID) -> None:
    recorder = RefusalRecorder(pool)
    recorder.record(agent_id, NIGHT_KEY, "org_cap", AT)
    assert _facts(pool) == []
    assert recorder.flush() == 1
    assert _facts(pool) == [(NIGHT_KEY, "org_cap")]


def test_a_fleet_retrying_every_minute_is_one_fact_per_agent_slot_and_reason(
    pool: Pool, agent_id: UUID
) -> None:
    recorder = RefusalRecorder(pool)
    for _ in range(100):
        recorder.record(agent_id, NIGHT_KEY, "global_cap", AT)
    recorder.record(agent_id, NIGHT_KEY, "brake", AT)
    assert recorder.pending() == 2
    assert recorder.flush() == 2
    recorder.record(agent_id, NIGHT_KEY, "global_cap", AT)  # already written: not sent again
    assert recorder.flush() == 0
    assert recorder.refused_counts() == {"global_cap": 101, "brake": 1}


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("not_a_slot", id="not_a_slot"),
        pytest.param("window_closed", id="window_closed"),
        pytest.param("slot_consumed", id="slot_consumed"),
    ],
)
def test_refusals_that_explain_no_miss_are_counted_not_kept(
    pool: Pool, agent_id: UUID, code: str
) -> None:
    recorder = RefusalRecorder(pool)
    recorder.record(agent_id, NIGHT_KEY, code, AT)
    assert recorder.flush() == 0
    assert recorder.refused_counts() == {code: 1}


def test_a_full_buffer_drops_and_counts_instead_of_growing(pool: Pool, agent_id: UUID) -> None:
    recorder = RefusalRecorder(pool, max_pending=2)
    for n in range(5):
        recorder.record(agent_id, f"2026-11-30T03:{n * 5:02d}", "org_cap", AT)
    assert (recorder.pending(), recorder.dropped) == (2, 3)


def test_facts_survive_a_flush_while_the_database_is_away(
    database_url: str, agent_id: UUID
) -> None:
    away = open_pool(database_url, min_size=1, max_size=1)
    recorder = RefusalRecorder(away)
    recorder.record(agent_id, NIGHT_KEY, "org_cap", AT)
    away.close()
    with pytest.raises(psycopg.OperationalError):
        recorder.flush()
    assert recorder.pending() == 1


def test_a_deleted_agent_does_not_block_the_others(pool: Pool, agent_id: UUID) -> None:
    recorder = RefusalRecorder(pool)
    recorder.record(uuid4(), NIGHT_KEY, "org_cap", AT)  # an agent deleted since its refusal
    recorder.record(agent_id, NIGHT_KEY, "org_cap", AT)
    assert recorder.flush() == 2
    assert _facts(pool) == [(NIGHT_KEY, "org_cap")]
    assert recorder.pending() == 0


def test_stop_writes_what_is_still_buffered(pool: Pool, agent_id: UUID) -> None:
    recorder = RefusalRecorder(pool, flush_interval_seconds=3600)
    recorder.start()
    recorder.record(agent_id, NIGHT_KEY, "brake", AT)
    recorder.stop()
    assert _facts(pool) == [(NIGHT_KEY, "brake")]


def test_a_flush_that_keeps_failing_is_said_once_a_minute_and_when_it_writes_again(
    database_url: str, agent_id: UUID, caplog: pytest.LogCaptureFixture
) -> None:
    """Behind a lock held by hand the flusher fails every second for as long as it lasts: one
    line, then one a minute, and one when the facts are written."""
    caplog.set_level(logging.WARNING, "control_plane.claims.refusals")
    ticks = [1000.0]
    bounded = open_pool(
        database_url, bounds=SessionBounds(lock_timeout_seconds=0.2, statement_timeout_seconds=None)
    )
    recorder = RefusalRecorder(bounded, monotonic=lambda: ticks[0])

    def said() -> list[str]:
        return [record.getMessage() for record in caplog.records]

    try:
        with psycopg.connect(database_url) as operator:
            operator.execute("LOCK TABLE claim_refusals IN EXCLUSIVE MODE")
            for _ in range(5):
                recorder.record(agent_id, NIGHT_KEY, RefusalCode.ORG_CAP, AT)
                recorder.flush_logged()
                ticks[0] += 1
            assert len(said()) == 1 and "claim refusals not written yet (kept" in said()[0]
            ticks[0] += REPEAT_SECONDS
            recorder.flush_logged()
            assert len(said()) == 2 and "not written yet after 65 s" in said()[1], said()
            operator.rollback()
        recorder.flush_logged()
        assert said()[-1] == "claim refusals written again after 65 s"
        assert _facts(bounded) == [(NIGHT_KEY, "org_cap")]
    finally:
        bounded.close()
