"""The database fails over; the control plane follows, and fences the primary it left.

A primary and its `pg_basebackup -R` standby (`tests.worlds.replicated_postgres`), replicas on the
multi-host URL. No timed assertions beyond generous bounds on recovery: the figures are printed,
and `bench/failover.py` measures them.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from control_plane.database import open_pool
from control_plane.database_fence import DatabaseFence, FencedServer
from tests.conftest import RunningControlPlane
from tests.worlds.failover_night import GLOBAL_CAP, ORG_CAP, FailoverNight
from tests.worlds.replicated_postgres import ReplicatedPair, replicated_pair
from tests.worlds.waiting import wait_until

pytestmark = pytest.mark.slow

# Bounds for a failure, not a speed expectation (the machine is shared): the figures are printed.
RECOVERY_BOUND_SECONDS = 20.0
# A third of the reconcile pool's wait for a connection, which a stop once waited out.
STOP_BOUND_SECONDS = 10.0


@pytest.fixture
def synchronous_pair() -> Iterator[ReplicatedPair]:
    with replicated_pair(synchronous=True) as pair:
        yield pair


@pytest.fixture
def pair() -> Iterator[ReplicatedPair]:
    with replicated_pair() as pair:
        yield pair


def test_a_night_through_a_failover_loses_and_doubles_no_grant(
    synchronous_pair: ReplicatedPair,
    control_plane_server: Callable[..., RunningControlPlane],
    tmp_path: Path,
) -> None:
    pair = synchronous_pair

    def start_replica(clock: str, flags: list[str]) -> RunningControlPlane:
        return control_plane_server(database_url=pair.url, fake_clock=clock, args=flags)

    night = FailoverNight(pair, start_replica, tmp_path)
    night.seed()
    night.run(kill_after=6.0, promote_after=2.0)

    recovery = night.recovery()
    print(
        f"time to recover (kill -> first database answer, first grant): {recovery};"
        f" the standby writable {night.promoted_at - night.killed_at:.2f} s after the kill"
    )
    for replica in recovery:
        assert replica.first_answer is not None
        assert replica.first_answer < RECOVERY_BOUND_SECONDS
    # Between the kill and the recovery only 503 database_unavailable, and nothing else.
    for answer in night.answers:
        assert answer.status in {200, 201, 409, 429, 503}, answer
        if answer.status == 503:
            assert answer.body["detail"]["code"] == "database_unavailable", answer
        if answer.status == 409:
            assert answer.body["detail"]["code"] == "window_closed", answer
    # The outage was seen by the probes: a 503, or a read that waited for the pool through the
    # promotion (a request waits up to the pool's 3 s for a connection, then answers 503).
    for replica in range(len(night.replicas)):
        after = [(at, status) for r, at, status in night.probes if r == replica]
        after = [(at, status) for at, status in after if at > night.killed_at]
        waited = max(b[0] - a[0] for a, b in itertools.pairwise(after))
        assert waited > 1.0 or any(status == 503 for _, status in after)
    assert {status for _, _, status in night.probes} <= {200, 503}

    seen = {
        answer.agent: answer.body["run_id"]
        for answer in night.answers
        if answer.status in {200, 201}
    }
    granted_twice = Counter(a.agent for a in night.answers if a.status == 201)
    assert max(granted_twice.values()) == 1
    with psycopg.connect(pair.standby.url) as conn:
        tokens = {str(row[0]) for row in conn.execute("SELECT run_id FROM tokens")}
        per_org = conn.execute("SELECT max(granted) FROM claim_rounds_org").fetchone()
        per_round = conn.execute("SELECT max(granted) FROM claim_rounds_global").fetchone()
    # Every grant an agent saw is on the new primary, and no other: none lost, none doubled.
    assert set(seen.values()) == tokens
    assert len(tokens) == len(seen)
    assert per_org is not None and per_org[0] <= ORG_CAP
    assert per_round is not None and per_round[0] <= GLOBAL_CAP

    # The night completes: every agent was granted or told the window closed, and the worker
    # records the misses of those never granted, on the new primary.
    ended = {a.agent for a in night.answers if a.status in {200, 201, 409}}
    assert ended == set(range(len(night.agent_keys)))
    missing = len(night.agent_keys) - len(seen)
    assert missing > 0

    def missed() -> int:
        with psycopg.connect(pair.standby.url) as conn:
            row = conn.execute("SELECT count(*) FROM runs WHERE status = 'missed'").fetchone()
        return 0 if row is None else int(row[0])

    wait_until(lambda: missed() == missing, what="the misses recorded", timeout=120)
    for replica in night.replicas:
        assert "Traceback" not in replica.stderr(), replica.stderr()


def _rows(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM written").fetchone()
    return 0 if row is None else int(row[0])


def test_a_demoted_primary_restarted_read_write_is_never_written_to(
    pair: ReplicatedPair,
) -> None:
    with psycopg.connect(pair.primary.url, autocommit=True) as conn:
        conn.execute("CREATE TABLE written (at float8)")
    pool = open_pool(pair.url, min_size=2, max_size=2, timeout=5)
    try:
        with pool.connection() as conn:
            conn.execute("INSERT INTO written VALUES (1)")
        pair.wait_caught_up()
        pair.kill(pair.primary)
        pair.promote(pair.standby)

        def wrote() -> bool:
            try:
                with pool.connection() as conn:
                    conn.execute("INSERT INTO written VALUES (2)")
            except psycopg.OperationalError:
                return False
            return True

        wait_until(wrote, what="a write on the promoted standby", timeout=RECOVERY_BOUND_SECONDS)
        # The old primary comes back read-write on its old timeline, first in the URL.
        pair.start(pair.primary)
        assert pair.is_writable(pair.primary)
        on_old = _rows(pair.primary.url)
        # New connections, in the same process: a second pool (the first holds its old ones).
        second = open_pool(pair.url, min_size=2, max_size=2, timeout=5)
        try:
            for _ in range(20):
                with second.connection() as conn:
                    conn.execute("INSERT INTO written VALUES (3)")
        finally:
            second.close()
        assert _rows(pair.primary.url) == on_old
        assert _rows(pair.standby.url) == 1 + 1 + 20

        # A process that has seen nothing yet asks both hosts and takes the newer timeline.
        fresh = DatabaseFence(pair.url)
        with fresh.connect(autocommit=True) as conn:
            conn.execute("INSERT INTO written VALUES (4)")
            assert conn.info.port == pair.standby.port
        assert _rows(pair.primary.url) == on_old

        # A URL naming only the old primary, once the newer timeline is known: refused.
        only_old = DatabaseFence(pair.primary.url)
        with psycopg.connect(pair.standby.url) as newer:
            only_old.check(newer)  # the new primary seen once
        with pytest.raises(FencedServer, match="timeline 1, behind timeline 2"):
            only_old.connect()
        assert _rows(pair.primary.url) == on_old
    finally:
        pool.close()


def test_a_replica_on_one_host_answers_within_seconds_after_the_database_returns(
    pair: ReplicatedPair,
    control_plane_server: Callable[..., RunningControlPlane],
) -> None:
    replica = control_plane_server(database_url=pair.primary.url)
    operator_key = replica.create_operator_key()

    def answers() -> int:
        try:
            return httpx.get(
                f"{replica.base_url}/v1/admin/settings",
                headers={"Authorization": f"Bearer {operator_key}"},
                timeout=30,
            ).status_code
        except httpx.HTTPError:
            return 0

    assert answers() == 200
    pair.stop(pair.primary)
    # Long enough down for a doubling backoff to reach tens of seconds (tries 1, 3, 7, 15, 31
    # and 63 s after the first failure): asked all along.
    down_until = time.monotonic() + 40
    while time.monotonic() < down_until:
        assert answers() == 503
        time.sleep(0.5)
    pair.start(pair.primary)
    back = time.monotonic()
    wait_until(lambda: answers() == 200, what="the replica to answer", timeout=60, interval=0.1)
    took = time.monotonic() - back
    print(f"replica on one host answered {took:.2f} s after the database returned")
    assert took < 10.0


def test_a_replica_stops_at_once_while_its_database_is_down(
    pair: ReplicatedPair,
    control_plane_server: Callable[..., RunningControlPlane],
) -> None:
    """A replica asked to stop (systemd's SIGTERM, a rolling restart) while its database is down
    stops at once and cleanly: its reconcile loop, waiting for a connection that cannot come,
    must not hold the stop for the whole of its pool's wait."""
    # A fast clock: the loop ticks every half second, so it is waiting for a connection when the
    # stop comes.
    replica = control_plane_server(
        database_url=pair.primary.url, fake_clock="2026-11-30T01:55:00Z,speed=60"
    )
    assert httpx.get(f"{replica.base_url}/healthz", timeout=30).status_code == 200
    pair.stop(pair.primary)
    time.sleep(2.0)
    asked = time.monotonic()
    code = replica.stop()
    took = time.monotonic() - asked
    print(f"replica stopped {took:.2f} s after SIGTERM with its database down")
    stderr = replica.stderr()
    assert code == 0, stderr
    assert "Traceback" not in stderr
    assert took < STOP_BOUND_SECONDS
