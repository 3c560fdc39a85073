"""How many sessions of this test's own database wait for a lock.

The suite's databases share one PostgreSQL server, and `pg_locks` shows every database's locks;
a row lock's wait is on a transaction id, which names no database. `pg_stat_activity` says which
database each waiting session is connected to, so a wait in another test's database never counts.
"""

from __future__ import annotations

import psycopg

from tests.worlds.waiting import wait_until

__all__ = ["lock_waits", "wait_for_a_lock_wait"]


def lock_waits(database_url: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as watch:
        row = watch.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def wait_for_a_lock_wait(database_url: str, *, sessions: int = 1) -> None:
    """Until `sessions` sessions of this database (or more) wait for a lock."""
    wait_until(
        lambda: lock_waits(database_url) >= sessions,
        what=f"{sessions} session(s) of this test's database to wait for a lock",
        interval=0.01,
    )
