"""The reconcile worker: one active replica through a PostgreSQL advisory lock; the
others wait and take over when it dies; the loop runs passes on the clock object."""

from __future__ import annotations

import logging
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psycopg
import pytest

from control_plane.database import open_pool
from control_plane.errors import ConfigurationError
from control_plane.reconcile import ReconcileWorker
from control_plane.reconcile.leader import RECONCILE_LOCK_KEY, LeaderLock
from control_plane.reconcile.passes import PassSettings
from control_plane.registry import Services
from control_plane.types import Pool
from nachtwacht.demo_world.clocks import NightClock
from tests.conftest import REPO_ROOT, RunningControlPlane, child_environment
from tests.control_plane.reconcile_fleet import AFTER_NIGHT, Fleet
from tests.worlds.clocks import ManualClock

# A deadline for a failure, never a speed assertion: hand-over normally takes milliseconds.
DEADLINE_SECONDS = 60


def _eventually(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {DEADLINE_SECONDS} s: {what}")
        threading.Event().wait(0.05)


@pytest.fixture
def workers(pool: Pool, clock: ManualClock, database_url: str) -> Iterator[list[ReconcileWorker]]:
    made = [
        ReconcileWorker(pool, clock, database_url, identity=name) for name in ("first", "second")
    ]
    yield made
    for worker in made:
        worker.stop()


def _progress(pool: Pool) -> dict[str, object]:
    with pool.connection() as conn:
        row = conn.execute("SELECT last_pass_by, passes FROM reconcile_progress").fetchone()
    assert row is not None
    return row


def test_one_worker_works_while_the_other_waits(
    workers: list[ReconcileWorker], pool: Pool, clock: ManualClock
) -> None:
    first, second = workers
    clock.set(AFTER_NIGHT)
    assert first.tick() is not None
    assert second.tick() is None
    assert first.tick() is not None
    assert (first.is_leader, second.is_leader) == (True, False)
    assert _progress(pool) == {"last_pass_by": "first", "passes": 2}


def test_the_waiting_worker_takes_over_when_the_first_loses_its_session(
    workers: list[ReconcileWorker], pool: Pool, clock: ManualClock, database_url: str
) -> None:
    first, second = workers
    clock.set(AFTER_NIGHT)
    assert first.tick() is not None
    # The first replica's database session dies (crash, network cut): PostgreSQL frees the lock.
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_locks"
            " WHERE locktype = 'advisory' AND granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND ((classid::bigint << 32) | objid::bigint) = %s",
            [RECONCILE_LOCK_KEY],
        )
    _eventually(lambda: second.tick() is not None, "the second worker takes the lock")
    assert first.tick() is None  # it noticed, and now it waits
    assert _progress(pool)["last_pass_by"] == "second"


def test_a_stopped_worker_hands_over_at_once(
    workers: list[ReconcileWorker], clock: ManualClock
) -> None:
    first, second = workers
    clock.set(AFTER_NIGHT)
    assert first.tick() is not None
    first.stop()
    assert second.tick() is not None


def test_the_lock_session_is_named_after_its_replica(database_url: str) -> None:
    """pg_stat_activity names the replica that holds the worker's lock, and a replica refused
    the lock knows which session holds it."""
    holding = LeaderLock(database_url, identity="cp-1:4242:abcd1234")
    waiting = LeaderLock(database_url, identity="cp-2:4343:ef567890")
    try:
        assert holding.try_acquire()
        with psycopg.connect(database_url, autocommit=True) as admin:
            names = admin.execute(
                "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
                " WHERE l.locktype = 'advisory' AND l.granted"
                " AND ((l.classid::bigint << 32) | l.objid::bigint) = %s",
                [RECONCILE_LOCK_KEY],
            ).fetchall()
        assert names == [("nachtwacht reconcile cp-1:4242:abcd1234",)]
        assert waiting.try_acquire() is False
        assert waiting.holder is not None
        assert waiting.holder.application_name == "nachtwacht reconcile cp-1:4242:abcd1234"
        assert waiting.holder.describe().startswith(f"database session {waiting.holder.pid} (")
    finally:
        holding.release()
        waiting.release()


def test_a_refused_replica_names_a_hung_holder(
    workers: list[ReconcileWorker],
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A holder that hangs keeps its session and the lock: no replica takes over, and no pass
    finishes. The replicas refused the lock say which session holds it and how to end it."""
    first, second = workers
    clock.set(AFTER_NIGHT)
    assert first.tick() is not None
    caplog.set_level(logging.WARNING, logger="control_plane.reconcile.worker")
    # The first replica goes on passing: the second waits quietly.
    for _ in range(12):
        clock.advance(seconds=30)
        assert first.tick() is not None
        assert second.tick() is None
    assert "holds the worker's lock" not in caplog.text
    # Now the first hangs (it ticks no more) and keeps its session.
    for _ in range(12):
        clock.advance(seconds=30)
        assert second.tick() is None
    warnings = [r.getMessage() for r in caplog.records if "holds the worker's lock" in r.message]
    assert len(warnings) == 1, caplog.text
    assert "(nachtwacht reconcile first)" in warnings[0]
    assert "no pass has finished since" in warnings[0]
    assert "SELECT pg_terminate_backend(" in warnings[0]


def test_the_lock_outlives_nothing_but_its_process(database_url: str) -> None:
    """A replica killed with SIGKILL never says goodbye; its session ends and the lock with it."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from control_plane.reconcile.leader import LeaderLock\n"
            "lock = LeaderLock(sys.argv[1])\n"
            "assert lock.try_acquire()\n"
            "print('holding', flush=True)\n"
            "time.sleep(600)\n",
            database_url,
        ],
        cwd=REPO_ROOT,
        env=child_environment(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "holding"
        waiting = LeaderLock(database_url)
        assert waiting.try_acquire() is False
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        _eventually(waiting.try_acquire, "the lock is free after the holder was killed")
        waiting.release()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def test_the_loop_runs_passes_until_stopped(pool: Pool, database_url: str) -> None:
    clock = ManualClock(AFTER_NIGHT)
    worker = ReconcileWorker(
        pool, clock, database_url, identity="looping", interval=timedelta(milliseconds=20)
    )
    worker.start()
    try:
        _eventually(lambda: int(str(_progress(pool)["passes"])) >= 3, "three passes")
    finally:
        worker.stop()
    assert worker.is_leader is False


def _replica_pid(replica: RunningControlPlane) -> int:
    return replica.process.pid


def test_two_serving_replicas_one_works_and_the_other_takes_over_when_it_is_killed(
    control_plane_server: Callable[..., RunningControlPlane],
    database_url: str,
    services: Services,
    pool: Pool,
    clock: ManualClock,
) -> None:
    fleet = Fleet(pool, services, clock)
    try:
        fleet.agent(fleet.org(), "web-01")
    finally:
        fleet.close()
    fake = f"2026-11-30T02:30:00Z,anchor={time.time()!r},speed=60"
    first = control_plane_server(fake_clock=fake)
    _eventually(lambda: _progress(pool)["last_pass_by"] is not None, "the first replica works")
    assert str(_replica_pid(first)) in str(_progress(pool)["last_pass_by"])
    second = control_plane_server(fake_clock=fake)
    passes = int(str(_progress(pool)["passes"]))
    _eventually(lambda: int(str(_progress(pool)["passes"])) >= passes + 3, "more passes")
    assert str(_replica_pid(first)) in str(_progress(pool)["last_pass_by"])  # the second waits
    first.process.send_signal(signal.SIGKILL)
    first.process.wait()
    _eventually(
        lambda: str(_replica_pid(second)) in str(_progress(pool)["last_pass_by"]),
        "the second replica takes over",
    )
    missed = fleet.rows("SELECT count(*) AS n FROM runs WHERE status = 'missed'")
    assert missed == [{"n": 1}]  # the 03:00 slot, recorded once whoever did it


@pytest.mark.slow
def test_a_serving_replica_records_a_throttled_night_end_to_end(
    control_plane_server: Callable[..., RunningControlPlane],
    services: Services,
    pool: Pool,
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    """A real `serve` process on a fast fake clock: the refusal goes through the buffer and the
    flusher, and the worker turns it into a missed run with reason `throttled`."""
    org = services.accounts.create_org("Acme", now=clock.now())
    agent = services.accounts.enroll_agent(org.org_id, "web-01", now=clock.now())
    # Caps are at least 1: the organisation's rounds of the window are full instead.
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO claim_rounds_org (round_start, org_id, granted)"
            " SELECT g, %s, 1 FROM generate_series("
            " '2026-11-30T02:00Z'::timestamptz, '2026-11-30T02:30Z', interval '1 minute') g",
            [org.org_id],
        )
    # Held at 03:05 (inside the window) until the claim was refused, however long the replica
    # takes to start on a loaded machine; then it runs, and the window closes 10 s later.
    night = NightClock.held(
        datetime(2026, 11, 30, 2, 5, tzinfo=UTC), begins=tmp_path / "clock", speed=60.0
    )
    replica = control_plane_server(fake_clock=night.setting, args=["--org-cap", "1"])
    with httpx.Client(base_url=replica.base_url, timeout=30) as client:
        refused = client.post(
            "/v1/agent/claims",
            json={"slot_key": "2026-11-30T03:00"},
            headers={"Authorization": f"Bearer {agent.agent_key}"},
        )
    assert refused.status_code == 429
    night.begin()

    def missed_reason() -> object:
        with pool.connection() as conn:
            row = conn.execute("SELECT miss_reason FROM runs WHERE status = 'missed'").fetchone()
        return None if row is None else row["miss_reason"]

    _eventually(lambda: missed_reason() is not None, "the worker records the missed night")
    assert missed_reason() == "throttled"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("settle", timedelta(seconds=-1), id="negative_settle"),
        pytest.param("outcome_grace", 60, id="grace_not_a_timedelta"),
    ],
)
def test_pass_settings_refuse_a_bad_value_naming_it(field: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=f"^{field}: "):
        PassSettings(**{field: value})  # type: ignore[arg-type]


def test_an_unreachable_database_means_not_the_worker() -> None:
    # A port held by this socket, bound but never listening: a connection there is refused, and
    # no other process can take the port meanwhile (one merely free a moment ago could be).
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        lock = LeaderLock(f"postgresql://nachtwacht@127.0.0.1:{port}/nachtwacht?connect_timeout=5")
        assert lock.try_acquire() is False
        assert lock.held is False


def test_a_failed_pass_is_retried_on_the_next_tick(
    database_url: str, clock: ManualClock, pool: Pool
) -> None:
    broken = open_pool(database_url, min_size=1, max_size=1)
    broken.close()  # the pass cannot get a connection; the lock (its own connection) can
    worker = ReconcileWorker(broken, clock, database_url, identity="unlucky")
    try:
        clock.set(AFTER_NIGHT)
        assert worker.tick() is None
        assert worker.is_leader  # it stays the worker and tries again
    finally:
        worker.stop()
    assert _progress(pool)["passes"] == 0
