"""The fence's choices without a failover: which host comes first, and a server of another
cluster refused (a real PostgreSQL each)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from control_plane.database_fence import DatabaseFence, FencedServer, read_position
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
