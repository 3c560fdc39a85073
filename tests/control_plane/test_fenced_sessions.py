"""A replica's database sessions are named `nachtwacht serve <replica>` only once the fence has
admitted their server (`control_plane.replica_sessions`, `control_plane.database_fence`): a
replica left running across a restore opens sessions on the restored server only to check it,
and while it checks, `after-restore` (which looks for those names) must not take it for a replica
serving from that database.

The check is held where it reads the data's clusters (another session holds `database_clusters`
locked), so the session can be seen while the fence has not decided yet; then the data is made a
copy of another cluster's (fenced) or left as it is (admitted)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from control_plane import database
from control_plane.database_fence import DatabaseFence, FencedServer, fenced_connect
from control_plane.errors import DatabaseUnavailable
from control_plane.replica_sessions import connected_replicas, replica_session_name

NAME = replica_session_name("replica-7")
FOREIGN = "7000000000000000001"


def _sessions(database_url: str) -> list[dict[str, Any]]:
    """The other sessions on the test's database: their name and whether they wait for a lock."""
    with psycopg.connect(database_url, autocommit=True, row_factory=psycopg.rows.dict_row) as c:
        return c.execute(
            "SELECT application_name, wait_event_type FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()


def _replicas(database_url: str) -> int:
    with psycopg.connect(database_url, autocommit=True, row_factory=psycopg.rows.dict_row) as c:
        return connected_replicas(c).sessions


@contextmanager
def _clusters_held(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    """`database_clusters` locked by another session until the block ends (and its transaction
    commits what the test wrote in it)."""
    with psycopg.connect(database_url) as holder:
        holder.execute("LOCK TABLE database_clusters IN ACCESS EXCLUSIVE MODE")
        yield holder
        holder.commit()


def _in_the_background(work: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:  # the test reads what it raised
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def _checking(database_url: str) -> list[dict[str, Any]]:
    """The sessions waiting on the held table (the fence's check), once there is one."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        waiting = [s for s in _sessions(database_url) if s["wait_event_type"] == "Lock"]
        if waiting:
            return waiting
        time.sleep(0.05)
    raise AssertionError("no session came to check the server")


def _open_a_connection(database_url: str) -> Callable[[], object]:
    return lambda: DatabaseFence(database_url).connect(application_name=NAME, autocommit=True)


def _open_a_fenced_connection(database_url: str) -> Callable[[], object]:
    # The change feed's and the reconcile lock's way: the process's one fence for the URL.
    return lambda: fenced_connect(database_url, application_name=NAME, autocommit=True)


def _open_a_pool(database_url: str) -> Callable[[], object]:
    return lambda: database.open_pool(database_url, min_size=1, max_size=1, application_name=NAME)


OPENERS = [
    pytest.param(_open_a_connection, id="connection"),
    pytest.param(_open_a_fenced_connection, id="feed_and_reconcile_lock"),
    pytest.param(_open_a_pool, id="pool"),
]


@pytest.mark.parametrize("opener", OPENERS)
def test_a_fenced_replicas_sessions_stay_unnamed(
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    opener: Callable[[str], Callable[[], object]],
) -> None:
    monkeypatch.setattr(database, "POOL_OPEN_SECONDS", 2.0)
    with _clusters_held(database_url) as holder:
        thread, outcome = _in_the_background(opener(database_url))
        checking = _checking(database_url)
        assert [s["application_name"] for s in checking] == [""]
        assert _replicas(database_url) == 0
        # The data is a copy restored into another cluster: `after-restore` has not run.
        holder.execute("UPDATE database_clusters SET system_identifier = %s", [FOREIGN])
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], FencedServer | DatabaseUnavailable)
    # Each try the pool made in the meantime was checked, refused and closed, never named.
    assert not [s for s in _sessions(database_url) if s["application_name"].startswith(NAME)]
    assert _replicas(database_url) == 0


@pytest.mark.parametrize("opener", OPENERS)
def test_an_admitted_replicas_sessions_are_named_once_the_check_passed(
    database_url: str, opener: Callable[[str], Callable[[], object]]
) -> None:
    with _clusters_held(database_url):
        thread, outcome = _in_the_background(opener(database_url))
        assert [s["application_name"] for s in _checking(database_url)] == [""]
        assert _replicas(database_url) == 0
    thread.join(timeout=60)
    assert len(outcome) == 1 and not isinstance(outcome[0], BaseException), outcome
    opened = outcome[0]
    try:
        assert [s["application_name"] for s in _sessions(database_url)] == [NAME]
        assert _replicas(database_url) == 1
    finally:
        opened.close()  # type: ignore[attr-defined]
