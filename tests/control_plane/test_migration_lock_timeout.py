"""A migration waiting for a table in use gives up instead of stopping every query behind it.

A statement that changes a table (here rev0016's `ALTER TABLE agents`) needs the table alone: it
waits for the queries already using it, and every query that comes after waits behind it. A long
report over `agents` would then stop every replica's polls and claims. With the runner's lock
timeout the migration gives up, rolled back whole, the queries behind it go on, and it is run
again once the report has ended.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from control_plane import migrate
from control_plane.errors import DatabaseUnavailable
from tests.worlds.processes import run_child
from tests.worlds.waiting import wait_until

BEFORE_ALTER = "0015_offer_halted_skips"  # rev0016 alters `agents`
LOCK_TIMEOUT = 3.0
# How long the writer behind the migration may wait before the test calls it stopped: far more
# than the lock timeout, far less than the report holds the table.
WRITER_PATIENCE_MS = 20_000


def _waiting_for_a_lock(database_url: str, application: str) -> bool:
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            " AND query LIKE %s",
            (f"%{application}%",),
        ).fetchone()
    return row is not None and row[0] > 0


def test_a_migration_behind_a_long_query_gives_up_and_the_writers_behind_it_go_on(
    empty_database_url: str,
) -> None:
    migrate.upgrade(empty_database_url, BEFORE_ALTER)
    failures: list[BaseException] = []

    def run_migration() -> None:
        try:
            migrate.upgrade(empty_database_url, lock_timeout_seconds=LOCK_TIMEOUT)
        except BaseException as exc:
            failures.append(exc)

    # The long report: a transaction that has read `agents` and is still open.
    with psycopg.connect(empty_database_url) as report:
        report.execute("SELECT count(*) FROM agents").fetchone()
        migration = threading.Thread(target=run_migration)
        migration.start()
        try:
            wait_until(
                lambda: _waiting_for_a_lock(empty_database_url, "ALTER TABLE agents"),
                timeout=60,
                what="the migration waiting for `agents`",
            )
            # A replica's write, arriving behind the waiting migration.
            with psycopg.connect(empty_database_url, autocommit=True) as writer:
                writer.execute(f"SET statement_timeout = {WRITER_PATIENCE_MS}")
                started = time.monotonic()
                writer.execute("UPDATE agents SET name = name WHERE false")
                waited = time.monotonic() - started
            migration.join(timeout=60)
            assert not migration.is_alive()
        finally:
            report.rollback()
            migration.join(timeout=120)

    assert waited < WRITER_PATIENCE_MS / 1000
    assert len(failures) == 1 and isinstance(failures[0], DatabaseUnavailable), failures
    message = str(failures[0])
    assert message.startswith("migration gave up: a table it changes stayed in use")
    assert "run the migration again" in message
    # Rolled back whole, and run again once the report has ended.
    assert migrate.current_revision(empty_database_url) == BEFORE_ALTER
    migrate.upgrade(empty_database_url)
    assert migrate.current_revision(empty_database_url) == migrate.head_revision()


@pytest.mark.parametrize("text", ["0", "-1", "nan", "soon", "601"])
def test_the_command_refuses_a_lock_timeout_that_is_no_duration(text: str) -> None:
    result = run_child("control", "migrate", "--lock-timeout-seconds", text)
    assert result.returncode == 2
    # One line naming the option once, the value and what was expected.
    assert result.stderr == (
        "nachtwacht control migrate: argument --lock-timeout-seconds: "
        f"{text!r} — expected seconds above 0 and at most 600\n"
    )
