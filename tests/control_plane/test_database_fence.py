"""The fence's choices without a failover: which host comes first, and a server of another
cluster refused (a real PostgreSQL each)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from control_plane import database, database_fence, repeated_warning
from control_plane.database_fence import DatabaseFence, FencedServer, read_position
from control_plane.errors import DatabaseUnavailable
from tests.worlds.replicated_postgres import ReplicatedPair, replicated_pair


@pytest.fixture(scope="module")
def pair() -> Iterator[ReplicatedPair]:
    with replicated_pair() as pair:
        yield pair


@pytest.mark.parametrize(
    ("url", "hosts", "ports"),
    [
        pytest.param("host=a,b port=1,2", "a,b", "1,2", id="one_port_each"),
        pytest.param("host=a,b port=5432", "a,b", "5432", id="one_port_for_all"),
        pytest.param("host=a port=1", "a", "1", id="one_host"),
    ],
)
def test_the_url_is_kept_while_nothing_was_fenced(url: str, hosts: str, ports: str) -> None:
    params = conninfo_to_dict(DatabaseFence(url).conninfo())
    assert (params["host"], params["port"]) == (hosts, ports)


def test_a_standby_and_its_primary_stand_in_one_cluster(pair: ReplicatedPair) -> None:
    with psycopg.connect(pair.primary.url) as primary, psycopg.connect(pair.standby.url) as standby:
        on_primary, on_standby = read_position(primary), read_position(standby)
    assert on_primary.system == on_standby.system
    assert (on_primary.standby, on_standby.standby) == (False, True)
    assert on_primary.timeline == on_standby.timeline == 1


def test_a_server_of_another_cluster_is_refused(pair: ReplicatedPair, database_url: str) -> None:
    fence = DatabaseFence(database_url)
    with psycopg.connect(pair.primary.url) as ours:
        fence.check(ours)
    with pytest.raises(FencedServer, match="another cluster"):
        fence.connect()


def test_a_fresh_process_surveys_every_host_and_follows_the_writable_one(
    pair: ReplicatedPair,
) -> None:
    fence = DatabaseFence(pair.url)
    with fence.connect(autocommit=True) as conn:
        assert conn.info.port == pair.primary.port
    assert fence.newest is not None and fence.newest.timeline == 1


def test_a_copy_restored_into_another_cluster_is_fenced_until_after_restore(
    database_url: str,
) -> None:
    """The data names the clusters it lives in; a server whose own cluster is not among them
    holds a copy (a `pg_dump` restore into a new server): refused, except to the commands that
    finish a restore, until `after-restore` records its cluster."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        here = read_position(conn).system
        recorded = conn.execute("SELECT system_identifier FROM database_clusters").fetchall()
        assert recorded == [(here,)], "the migration records the cluster it ran on"
        conn.execute("UPDATE database_clusters SET system_identifier = '7000000000000000001'")
    with pytest.raises(FencedServer, match=r"another cluster .*after-restore` has not run"):
        DatabaseFence(database_url).connect()

    finishing = DatabaseFence(database_url)
    finishing.allow_unfinished_restore()
    with finishing.connect(autocommit=True) as conn:
        conn.execute(
            "INSERT INTO database_clusters (system_identifier, recorded_at, recorded_by)"
            " VALUES (%s, now(), 'after-restore')",
            [here],
        )
    with DatabaseFence(database_url).connect() as conn:
        assert read_position(conn).system == here


def test_a_database_that_names_no_cluster_is_used(database_url: str) -> None:
    """Before the table is filled (or made) nothing says where the data belongs: used."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DELETE FROM database_clusters")
    with DatabaseFence(database_url).connect() as conn:
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_a_process_that_cannot_start_on_a_fenced_server_says_why(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replica or an admin command started before `after-restore` ends with the fence's reason,
    not with the pool's wait (`pool initialization incomplete after 15 sec`)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE database_clusters SET system_identifier = '7000000000000000001'")
    monkeypatch.setattr(database, "POOL_OPEN_SECONDS", 1.0)
    with pytest.raises(DatabaseUnavailable) as refused:
        database.open_pool(database_url)
    assert re.fullmatch(
        r"cannot connect to the database: the database at \S+ holds data written on another"
        r" cluster \(this server's system identifier is \d+\): a restore into a new server, and"
        r" `nachtwacht control after-restore` has not run on it: not used until it has",
        str(refused.value),
    ), refused.value


def test_a_fenced_server_is_logged_once_a_minute_with_the_count_since(
    database_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Every new connection to a fenced server is refused, one per request: the reason is logged
    the first time and then once a minute with how often it was refused in between, not once per
    request."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE database_clusters SET system_identifier = '7000000000000000001'")
    seconds = [1000.0]
    monkeypatch.setattr(repeated_warning.time, "monotonic", lambda: seconds[0])
    fence = DatabaseFence(database_url)

    def refused_times(count: int) -> list[str]:
        caplog.clear()
        for _ in range(count):
            with pytest.raises(FencedServer):
                fence.connect()
        return [r.getMessage() for r in caplog.records if r.getMessage().startswith("FENCED")]

    with caplog.at_level(logging.ERROR, logger=database_fence.__name__):
        first = refused_times(5)
        seconds[0] += database_fence.FENCED_LOG_EVERY_SECONDS - 1
        within_the_minute = refused_times(3)
        seconds[0] += 1
        a_minute_on = refused_times(1)
    assert len(first) == 1 and "another cluster" in first[0], first
    assert within_the_minute == []
    assert len(a_minute_on) == 1, a_minute_on
    # Each refused request is at least one refused connection (a connect may try again once).
    since = re.search(r"\(refused (\d+) more times since the last line\)$", a_minute_on[0])
    assert since is not None and int(since.group(1)) >= 7, a_minute_on
