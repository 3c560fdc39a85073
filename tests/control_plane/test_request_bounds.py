"""The bounds of the requests' connections: a statement that runs too long is cancelled and
answered 503; the reconcile worker's passes are not cut by them; the URL and the settings change
them, and a bad value is refused naming where it came from."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.answers_cache import warm_up
from control_plane.answers_cache.feed import ChangeFeed
from control_plane.answers_cache.memory import AnswerMemory, Changes
from control_plane.answers_cache.seen import SeenRecorder
from control_plane.answers_cache.warm_up import SlotWarmUp
from control_plane.api import app as api_app
from control_plane.brake import services as brake_services
from control_plane.config import DatabaseLocation, ServeSettings, request_bounds
from control_plane.database import (
    REQUEST_LOCK_TIMEOUT_SECONDS,
    REQUEST_STATEMENT_TIMEOUT_SECONDS,
    SessionBounds,
    bounded_conninfo,
    open_pool,
    reconcile_bounds,
)
from control_plane.errors import ConfigurationError
from control_plane.reconcile import passes
from control_plane.reconcile.worker import ReconcileWorker
from control_plane.registry import build_services
from control_plane.releases import services as release_services
from control_plane.rollout import kept_offers
from control_plane.types import Connection, Pool
from signed_release.keys import key_id
from tests.control_plane.conftest import serve_in_thread, sign_release
from tests.control_plane.lock_waits import wait_for_a_lock_wait
from tests.worlds.clocks import ManualClock

# Short bounds, so the test waits little; the statement that runs too long takes ten times as long.
STATEMENT_TIMEOUT_SECONDS = 0.3
SLOW_SECONDS = 10 * STATEMENT_TIMEOUT_SECONDS
BOUNDS = SessionBounds(
    lock_timeout_seconds=0.2, statement_timeout_seconds=STATEMENT_TIMEOUT_SECONDS
)


@pytest.fixture
def bounded_pool(database_url: str) -> Iterator[Pool]:
    opened = open_pool(database_url, min_size=1, max_size=2, bounds=BOUNDS)
    try:
        yield opened
    finally:
        opened.close()


def _slowed(original: Callable[..., Any]) -> Callable[..., Any]:
    """`original`, after a statement on its connection that runs `SLOW_SECONDS`."""

    def slow(conn: psycopg.Connection[Any], *args: Any, **kwargs: Any) -> Any:
        conn.execute("SELECT pg_sleep(%s)", [SLOW_SECONDS])
        return original(conn, *args, **kwargs)

    return slow


def test_a_statement_that_runs_too_long_is_cancelled_and_answered_503(
    bounded_pool: Pool,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    key = Ed25519PrivateKey.generate()
    services = build_services(bounded_pool, {key_id(key.public_key()): key.public_key()})
    operator_key = services.accounts.create_operator_key("tests")
    # The seam: reading the brake runs a statement longer than the bound first.
    monkeypatch.setattr(brake_services, "brake_state", _slowed(brake_services.brake_state))
    with (
        caplog.at_level(logging.ERROR, logger=api_app.__name__),
        serve_in_thread(services, clock) as server,
    ):
        answer = httpx.get(
            f"{server.base_url}/v1/admin/brake",
            headers={"Authorization": f"Bearer {operator_key}"},
            timeout=30,
        )
    assert answer.status_code == 503, answer.text[:200]
    assert answer.json()["detail"]["code"] == "database_unavailable"
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 1, lines
    assert lines[0].startswith("GET /v1/admin/brake answered 503 database_unavailable:"), lines
    assert "canceling statement due to statement timeout" in lines[0]
    assert "--request-statement-timeout-seconds" in lines[0]
    assert not any(record.exc_info for record in caplog.records)


def test_requests_cancelled_again_and_again_are_one_line_and_then_one_when_over(
    bounded_pool: Pool,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Said again (or over) after four seconds here, not a minute: the three requests take one.
    monkeypatch.setattr(api_app, "CANCELLED_LOG_EVERY_SECONDS", 4.0)
    key = Ed25519PrivateKey.generate()
    services = build_services(bounded_pool, {key_id(key.public_key()): key.public_key()})
    operator_key = services.accounts.create_operator_key("tests")
    original = brake_services.brake_state
    monkeypatch.setattr(brake_services, "brake_state", _slowed(original))
    headers = {"Authorization": f"Bearer {operator_key}"}
    with (
        caplog.at_level(logging.WARNING, logger=api_app.__name__),
        serve_in_thread(services, clock) as server,
    ):
        statuses = [
            httpx.get(f"{server.base_url}/v1/admin/brake", headers=headers, timeout=30).status_code
            for _ in range(3)
        ]
        monkeypatch.setattr(brake_services, "brake_state", original)
        served = httpx.get(f"{server.base_url}/v1/admin/brake", headers=headers, timeout=30)
        said_while_cancelling = len(caplog.records)
        time.sleep(4.1)
        httpx.get(f"{server.base_url}/healthz", timeout=30)
    assert statuses == [503, 503, 503]
    assert served.status_code == 200, served.text[:200]
    lines = [record.getMessage() for record in caplog.records]
    assert said_while_cancelling == 1, lines
    assert len(lines) == 2, lines
    assert lines[0].startswith("GET /v1/admin/brake answered 503 database_unavailable:"), lines
    assert lines[1].startswith("GET /v1/admin/brake: no request cancelled (the request"), lines
    assert "statement_timeout" in lines[1]
    assert lines[1].endswith(", 2 more since the last line"), lines


@pytest.mark.parametrize(
    ("bounds", "finished"),
    [
        pytest.param(reconcile_bounds(BOUNDS), True, id="the_workers_bounds"),
        pytest.param(BOUNDS, False, id="the_requests_bounds"),
    ],
)
def test_the_reconcile_workers_pass_is_not_cut_by_the_requests_statement_timeout(
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    bounds: SessionBounds,
    finished: bool,
) -> None:
    """A pass that runs a statement longer than a request may finishes on the worker's pool
    (the same pass on the requests' pool is cut: the seam is slow enough)."""
    monkeypatch.setattr(passes, "read_settings", _slowed(passes.read_settings))
    clock = ManualClock(datetime(2026, 11, 30, 6, 0, tzinfo=UTC))
    pool = open_pool(database_url, min_size=1, max_size=2, bounds=bounds)
    worker = ReconcileWorker(pool, clock, database_url, identity="bounded")
    try:
        report = worker.tick()
    finally:
        worker.stop()
        pool.close()
    assert (report is not None) is finished


def _shown(pool: Pool, name: str) -> str:
    with pool.connection() as conn:
        row = conn.execute(f"SHOW {name}").fetchone()
    assert row is not None
    return str(row[name])


def test_the_requests_connections_carry_their_bounds_and_the_urls_own_win(
    database_url: str,
) -> None:
    pool = open_pool(database_url, min_size=1, max_size=1, bounds=SessionBounds())
    try:
        assert _shown(pool, "lock_timeout") == f"{REQUEST_LOCK_TIMEOUT_SECONDS:g}s"
        assert _shown(pool, "statement_timeout") == f"{REQUEST_STATEMENT_TIMEOUT_SECONDS:g}s"
    finally:
        pool.close()
    own = f"{database_url} options='-c lock_timeout=7s -c search_path=public'"
    pool = open_pool(own, min_size=1, max_size=1, bounds=SessionBounds())
    try:
        assert _shown(pool, "lock_timeout") == "7s"
        assert _shown(pool, "search_path") == "public"
        assert _shown(pool, "statement_timeout") == f"{REQUEST_STATEMENT_TIMEOUT_SECONDS:g}s"
    finally:
        pool.close()
    worker = open_pool(database_url, min_size=1, max_size=1, bounds=reconcile_bounds(BOUNDS))
    try:
        assert _shown(worker, "statement_timeout") == "0"
        assert _shown(worker, "lock_timeout") == "200ms"
    finally:
        worker.close()


def test_a_pool_without_bounds_leaves_the_url_as_it_is() -> None:
    url = "host=db-a dbname=n options='-c search_path=x'"
    assert bounded_conninfo(url, None) == url


def test_the_bounds_are_far_below_an_agents_request_timeout_and_the_pool_wait() -> None:
    settings = ServeSettings(database=DatabaseLocation(url="postgresql:///x"))
    bounds = settings.request_bounds
    assert bounds == SessionBounds()
    assert bounds.lock_timeout_seconds is not None
    assert bounds.statement_timeout_seconds is not None
    # A request queued for a connection behind those waiting for a lock gets one in time.
    assert bounds.lock_timeout_seconds < settings.pool_wait_seconds
    # Within the load balancer's retry window (8 s) and an agent's request timeout (10 s).
    assert settings.pool_wait_seconds + bounds.statement_timeout_seconds <= 8


def test_the_bounds_come_from_the_flags_else_the_environment() -> None:
    env = {
        "NACHTWACHT_REQUEST_LOCK_TIMEOUT_SECONDS": "1.5",
        "NACHTWACHT_REQUEST_STATEMENT_TIMEOUT_SECONDS": "4",
    }
    assert request_bounds(None, None, env) == SessionBounds(
        lock_timeout_seconds=1.5, statement_timeout_seconds=4
    )
    assert request_bounds(3, None, env) == SessionBounds(
        lock_timeout_seconds=3, statement_timeout_seconds=4
    )
    assert request_bounds(None, None, {}) == SessionBounds()


@pytest.mark.parametrize("raw", ["0", "-1", "61", "soon"])
def test_a_bound_out_of_range_in_the_environment_is_refused_naming_the_variable(raw: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        request_bounds(None, None, {"NACHTWACHT_REQUEST_LOCK_TIMEOUT_SECONDS": raw})
    assert str(refused.value).startswith(f"NACHTWACHT_REQUEST_LOCK_TIMEOUT_SECONDS: {raw!r} is")


@pytest.mark.parametrize("seconds", [0, -1, 61])
def test_a_bound_out_of_range_is_refused_naming_the_flag(seconds: float) -> None:
    with pytest.raises(ConfigurationError, match="--request-statement-timeout-seconds"):
        ServeSettings(
            database=DatabaseLocation(url="postgresql:///x"),
            request_bounds=SessionBounds(statement_timeout_seconds=seconds),
        )


def test_the_worker_waits_for_a_lock_as_long_as_a_request_and_runs_unbounded() -> None:
    bounds = reconcile_bounds(SessionBounds(lock_timeout_seconds=1.5))
    assert bounds == SessionBounds(lock_timeout_seconds=1.5, statement_timeout_seconds=None)
    assert bounds.options() == "-c lock_timeout=1500"


def test_a_views_refresh_waits_for_another_refresh_longer_than_the_lock_timeout(
    database_url: str,
) -> None:
    """The kept offers' refresh after a fleet-wide write holds its lock for seconds on a large
    fleet; a view's refresh waits for it instead of answering 503 at the requests' lock bound
    (its statement's bound still holds)."""
    bounds = SessionBounds(lock_timeout_seconds=0.2, statement_timeout_seconds=10)
    pool = open_pool(database_url, min_size=1, max_size=1, bounds=bounds)
    finished: list[int] = []
    try:
        with psycopg.connect(database_url) as other, other.transaction():
            other.execute("SELECT pg_advisory_xact_lock(hashtext('nachtwacht.agent_offers'))")
            refreshing = threading.Thread(target=lambda: finished.append(_refresh(pool)))
            refreshing.start()
            wait_for_a_lock_wait(database_url)
            time.sleep(3 * 0.2)
        refreshing.join(30)
    finally:
        pool.close()
    assert finished == [0]


def _refresh(pool: Pool) -> int:
    with pool.connection() as conn:
        return kept_offers.refresh(conn)


def test_a_release_is_stored_past_the_statement_bound_and_the_bound_holds_again_after(
    bounded_pool: Pool,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Publishing stores a build of up to about 190 MB in one statement (100 MB took 6.7 s on a
    loaded machine): that statement runs without the requests' bound, the rest with it."""
    key = Ed25519PrivateKey.generate()
    services = build_services(bounded_pool, {key_id(key.public_key()): key.public_key()})
    monkeypatch.setattr(
        release_services, "_store_artifact", _slowed(release_services._store_artifact)
    )
    bound_after: list[str] = []
    make_current = release_services._make_current

    def noting_the_bound(conn: psycopg.Connection[Any], *args: Any) -> None:
        row = conn.execute("SHOW statement_timeout").fetchone()
        assert row is not None
        bound_after.append(str(row["statement_timeout"]))
        make_current(conn, *args)

    monkeypatch.setattr(release_services, "_make_current", noting_the_bound)
    release = sign_release(key)
    published = services.releases.publish(
        release.manifest, release.signature, release.artifact, now=clock.now()
    )
    assert published.version == release.version
    assert bound_after == [f"{STATEMENT_TIMEOUT_SECONDS * 1000:g}ms"]


def test_a_publish_waits_for_another_publisher_longer_than_the_requests_bounds(
    database_url: str,
    clock: ManualClock,
) -> None:
    pool = open_pool(database_url, min_size=1, max_size=1, bounds=BOUNDS)
    key = Ed25519PrivateKey.generate()
    services = build_services(pool, {key_id(key.public_key()): key.public_key()})
    release = sign_release(key)
    published: list[str] = []

    def publish() -> None:
        done = services.releases.publish(
            release.manifest, release.signature, release.artifact, now=clock.now()
        )
        published.append(done.version)

    try:
        with psycopg.connect(database_url) as other, other.transaction():
            other.execute("SELECT pg_advisory_xact_lock(hashtext('nachtwacht.publish_release'))")
            publishing = threading.Thread(target=publish)
            publishing.start()
            wait_for_a_lock_wait(database_url)
            time.sleep(3 * 0.2)
        publishing.join(30)
    finally:
        pool.close()
    assert published == [release.version]


def test_a_warm_up_cut_by_the_statement_bound_leaves_the_claim_to_go_on(
    bounded_pool: Pool, caplog: pytest.LogCaptureFixture
) -> None:
    """A fleet too large to read within a request's statement bound is not warmed up: the claim
    that asked goes on, on its connection, answered by its own read."""
    memory = AnswerMemory()
    memory.apply(Changes(everything=True), read_started=time.monotonic())  # as the feed does
    assert memory.epoch is not None

    def slow_read(conn: Connection, slot_key: str, at: datetime, limit: int) -> list[Any]:
        conn.execute("SELECT pg_sleep(%s)", [SLOW_SECONDS])
        return []

    at = datetime(2026, 11, 30, 2, 1, tzinfo=UTC)
    with (
        caplog.at_level(logging.WARNING, logger=warm_up.__name__),
        bounded_pool.connection() as conn,
    ):
        assert SlotWarmUp(memory, slow_read).ask(conn, "2026-11-30T03:00", at) == 0
        assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}
    [line] = [record.getMessage() for record in caplog.records]
    assert "warm-up of slot 2026-11-30T03:00 not done" in line
    assert "statement timeout" in line


def test_the_feeds_connection_keeps_the_urls_own_options(database_url: str) -> None:
    """The change feed sets its own statement bound; the URL's other options (a schema's
    `search_path`, say) are kept, not replaced."""
    own = f"{database_url} options='-c search_path=public,pg_catalog'"
    seen = SeenRecorder(
        resolution=timedelta(seconds=30),
        host_every=timedelta(minutes=5),
        stretch_gap=timedelta(minutes=3),
    )
    feed = ChangeFeed(own, AnswerMemory(), seen)
    try:
        feed.read_once()
        conn = feed._connection()
        shown = conn.execute("SELECT current_setting('search_path') AS s").fetchone()
        bound = conn.execute("SELECT current_setting('statement_timeout') AS s").fetchone()
    finally:
        feed.stop()
    assert shown == {"s": "public,pg_catalog"}
    assert bound == {"s": "1s"}
