"""The database ends every session under a serving control plane (a DBA's `pg_terminate_backend`,
a pooler cutting connections, a restart): the pool's idle connections are dead. The requests that
follow are served on fresh connections, none answered 503 for a connection nobody had used yet;
a request whose statement was running when its connection was cut is answered 503 and never sent
again (its claim may have been granted)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from control_plane.database import CutConnectionCheck, told_something
from control_plane.types import Pool
from ground.contract import CONFIG_PATH
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease
from tests.worlds.clocks import ManualClock
from tests.worlds.waiting import wait_until

SLOT = "2026-11-30T03:00"  # 02:00Z in Amsterdam's winter
IDLE_CONNECTIONS = 4
DEADLINE_SECONDS = 30.0


def _cut_every_session(database_url: str) -> int:
    """End every other session of the test's database, as a DBA would, and wait until they have
    ended; returns how many there were."""
    with psycopg.connect(database_url, autocommit=True) as admin:
        ended = admin.execute(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()) cut"
        ).fetchone()
    assert ended is not None
    return int(ended[0])


def _fill_with_idle_connections(pool: Pool, count: int) -> None:
    """Leave `count` connections idle in the pool, as a pool that served a busy minute has."""
    taken = [pool.getconn() for _ in range(count)]
    for conn in taken:
        pool.putconn(conn)
    assert pool.get_stats()["pool_available"] >= count


def _claim(api: Api, agent: Agent) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        return client.post("/v1/agent/claims", json={"slot_key": SLOT, "from_version": "1.4.1"})


def _poll(api: Api, agent: Agent) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        return client.get(CONFIG_PATH)


def test_after_every_connection_was_cut_the_next_polls_and_claims_are_served(
    api: Api,
    pool: Pool,
    database_url: str,
    clock: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    clock.set(datetime(2026, 11, 30, 2, 1, tzinfo=UTC))
    org = make_org()
    agents = [make_agent(org, f"web-{number:02}") for number in range(IDLE_CONNECTIONS)]
    for agent in agents:
        assert _poll(api, agent).status_code == 200
    _fill_with_idle_connections(pool, IDLE_CONNECTIONS)

    assert _cut_every_session(database_url) >= IDLE_CONNECTIONS

    answers = []
    for agent in agents:
        answers.append(("poll", _poll(api, agent).status_code))
        answers.append(("claim", _claim(api, agent).status_code))
    assert answers == [answer for agent in agents for answer in (("poll", 200), ("claim", 201))], (
        answers
    )


def test_a_claim_cut_while_its_statement_ran_is_answered_503_and_never_sent_again(
    api: Api,
    database_url: str,
    clock: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    clock.set(datetime(2026, 11, 30, 2, 1, tzinfo=UTC))
    agent = make_agent(make_org())
    answered: list[httpx.Response] = []
    with (
        psycopg.connect(database_url, autocommit=True) as holder,
        psycopg.connect(database_url, autocommit=True) as watcher,
    ):
        with holder.transaction():
            # A grant reads the brake FOR SHARE: the claim's statement waits behind this lock.
            holder.execute("SELECT 1 FROM platform_brake FOR UPDATE")
            claiming = threading.Thread(target=lambda: answered.append(_claim(api, agent)))
            claiming.start()

            def waiting_claim() -> int | None:
                row = watcher.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock' AND query LIKE '%platform_brake FOR SHARE%'"
                ).fetchone()
                return None if row is None else int(row[0])

            pid = wait_until(waiting_claim, what="the claim's lock wait", timeout=DEADLINE_SECONDS)
            watcher.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])
        # The lock is let go: a claim sent again now would be granted.
        claiming.join(DEADLINE_SECONDS)
    assert not claiming.is_alive()
    [response] = answered
    assert response.status_code == 503, response.text[:200]
    assert response.json()["detail"]["code"] == "database_unavailable"
    with psycopg.connect(database_url) as conn:
        tokens = conn.execute(
            "SELECT count(*) FROM tokens t JOIN runs r ON r.id = t.run_id WHERE r.agent_id = %s",
            [agent.agent_id],
        ).fetchone()
    assert tokens == (0,)
    # The agent asks again next minute, as it does after any 503, and is granted once.
    assert _claim(api, agent).status_code == 201


def test_a_fenced_server_found_after_the_cut_is_still_answered_503(
    api: Api,
    pool: Pool,
    database_url: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    """The fresh connection that replaces a cut one is checked against the fence like any new
    one: data that names another cluster (a copy restored into a new server) is not served."""
    agent = make_agent(make_org())
    assert _poll(api, agent).status_code == 200
    _fill_with_idle_connections(pool, IDLE_CONNECTIONS)
    with psycopg.connect(database_url, autocommit=True) as conn:
        [(here,)] = conn.execute("SELECT system_identifier FROM database_clusters").fetchall()
        conn.execute("UPDATE database_clusters SET system_identifier = '7000000000000000001'")

    _cut_every_session(database_url)

    refused = _poll(api, agent)
    assert refused.status_code == 503, refused.text[:200]
    assert refused.json()["detail"]["code"] == "database_unavailable"
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE database_clusters SET system_identifier = %s", [here])
    wait_until(
        lambda: _poll(api, agent).status_code == 200,
        what="the poll served again",
        timeout=DEADLINE_SECONDS,
    )


def test_a_live_connection_is_handed_out_and_only_one_told_something_is_asked(
    database_url: str,
) -> None:
    """The look before handing a connection out costs a poll of its socket, no query, while
    there is nothing to read; a live connection that was told something (here a notification)
    is asked an empty query and kept."""
    check = CutConnectionCheck()
    with psycopg.connect(database_url, autocommit=True) as conn:
        asked: list[str] = []
        execute = conn.execute

        def recording(query: Any, *args: Any, **kwargs: Any) -> Any:
            asked.append(str(query))
            return execute(query, *args, **kwargs)

        conn.execute = recording  # type: ignore[method-assign]
        check(conn)
        assert asked == []

        execute("LISTEN cut_connections")
        with psycopg.connect(database_url, autocommit=True) as other:
            other.execute("NOTIFY cut_connections")
        wait_until(lambda: told_something(conn), what="the notification", timeout=DEADLINE_SECONDS)
        check(conn)
        assert asked == [""]
        assert not conn.closed


def test_a_connection_its_server_ended_is_refused(database_url: str) -> None:
    check = CutConnectionCheck()
    with psycopg.connect(database_url, autocommit=True) as conn:
        _cut_every_session(database_url)
        with pytest.raises(psycopg.OperationalError):
            check(conn)
        assert conn.closed


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_a_serving_control_plane_serves_every_request_after_its_connections_were_cut(
    control_plane_server: Callable[..., Any],
    database_url: str,
    workers: int,
) -> None:
    server = control_plane_server(args=["--workers", str(workers)])
    org = server.create_org("Acme")
    operator_key = server.create_operator_key()
    agent = server.enroll_agent(org["org_id"], "web-01")
    name = conninfo_to_dict(database_url)["dbname"]
    assert name

    def get(path: str, key: str) -> int:
        # A connection of its own each time, so every worker is asked.
        headers = {"Authorization": f"Bearer {key}"}
        return httpx.get(f"{server.base_url}{path}", headers=headers, timeout=30).status_code

    # Busy enough that every worker's pool keeps several connections.
    with_threads = [
        threading.Thread(target=lambda: [get("/v1/admin/brake", operator_key) for _ in range(20)])
        for _ in range(6)
    ]
    for thread in with_threads:
        thread.start()
    for thread in with_threads:
        thread.join()

    _cut_every_session(database_url)

    statuses = []
    for _ in range(10):
        statuses.append(get("/v1/admin/brake", operator_key))
        statuses.append(get(CONFIG_PATH, agent["agent_key"]))
    assert statuses == [200] * len(statuses), statuses
    assert "Traceback" not in server.stderr()
