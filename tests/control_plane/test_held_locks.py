"""A lock held by hand (an operator's `psql` left in a transaction, a stuck migration) holds
only the requests that need it, each for at most the request connections' `lock_timeout`: they
are answered 503 `database_unavailable` with nothing written, the other organisations' claims
and polls and `/healthz` are served meanwhile, and the same claims are granted once the lock is
let go."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.database import open_pool
from control_plane.registry import build_services
from control_plane.types import Pool
from ground.contract import CONFIG_PATH
from signed_release.keys import key_id
from tests.conftest import RunningControlPlane
from tests.control_plane.conftest import sign_release
from tests.control_plane.lock_waits import wait_for_a_lock_wait
from tests.worlds.waiting import wait_until

pytestmark = pytest.mark.slow

SLOT = "2026-11-30T03:00"  # 02:00Z in Amsterdam's winter
POOL_SIZE = 3
LOCK_TIMEOUT_SECONDS = 1
POOL_WAIT_SECONDS = 4


@pytest.fixture
def pool(database_url: str) -> Iterator[Pool]:
    opened = open_pool(database_url, min_size=1, max_size=2)
    try:
        yield opened
    finally:
        opened.close()


@dataclass(frozen=True)
class Answer:
    status: int
    code: str | None
    seconds: float


def _answer(response: httpx.Response, started: float) -> Answer:
    code = None
    if response.status_code >= 400:
        try:
            code = response.json()["detail"]["code"]
        except (ValueError, KeyError, TypeError):
            code = response.text[:80]
    return Answer(response.status_code, code, time.monotonic() - started)


def _claim(base_url: str, key: str) -> Answer:
    started = time.monotonic()
    with httpx.Client(base_url=base_url, timeout=60) as client:
        response = client.post(
            "/v1/agent/claims",
            headers={"Authorization": f"Bearer {key}"},
            json={"slot_key": SLOT, "from_version": "1.4.1"},
        )
    return _answer(response, started)


def _poll(base_url: str, key: str) -> Answer:
    started = time.monotonic()
    with httpx.Client(base_url=base_url, timeout=60) as client:
        response = client.get(CONFIG_PATH, headers={"Authorization": f"Bearer {key}"})
    return _answer(response, started)


def _health(base_url: str) -> Answer:
    started = time.monotonic()
    return _answer(httpx.get(f"{base_url}/healthz", timeout=60), started)


def _in_threads(calls: list[Callable[[], Answer]]) -> tuple[list[threading.Thread], list[Answer]]:
    answers: list[Answer] = []
    lock = threading.Lock()

    def run(call: Callable[[], Answer]) -> None:
        answer = call()
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    return threads, answers


def _passes(database_url: str) -> int:
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT count(last_pass_at) FROM reconcile_progress").fetchone()
    return 0 if row is None else int(row[0])


def _tokens(database_url: str, org_id: str) -> int:
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM tokens t JOIN runs r ON r.id = t.run_id WHERE r.org_id = %s",
            [org_id],
        ).fetchone()
    assert row is not None
    return int(row[0])


@dataclass(frozen=True)
class World:
    server: RunningControlPlane
    held_org: str
    held: list[str]  # the agents' keys
    other_org: str
    other: list[str]


def _world(
    control_plane_server: Callable[..., RunningControlPlane], pool: Pool, database_url: str
) -> World:
    """A release, two organisations of `POOL_SIZE` agents each, and `serve` with a pool of that
    many connections at 03:01, the slot open."""
    key = Ed25519PrivateKey.generate()
    services = build_services(pool, {key_id(key.public_key()): key.public_key()})
    now = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
    release = sign_release(key)
    services.releases.publish(release.manifest, release.signature, release.artifact, now=now)
    held_org = services.accounts.create_org("Held", now=now)
    other_org = services.accounts.create_org("Other", now=now)
    held = [
        services.accounts.enroll_agent(held_org.org_id, f"web-{n}", now=now).agent_key
        for n in range(POOL_SIZE)
    ]
    other = [
        services.accounts.enroll_agent(other_org.org_id, f"db-{n}", now=now).agent_key
        for n in range(POOL_SIZE)
    ]
    # The product's time almost frozen at 03:01 CET: one round, the slot open.
    server = control_plane_server(
        fake_clock=f"2026-11-30T02:01:00Z,anchor={time.time()!r},speed=0.001",
        args=[
            "--pool-size",
            str(POOL_SIZE),
            "--pool-wait-seconds",
            str(POOL_WAIT_SECONDS),
            "--request-lock-timeout-seconds",
            str(LOCK_TIMEOUT_SECONDS),
            "--org-cap",
            "10",
            "--global-cap",
            "20",
        ],
    )
    # The reconcile worker's first pass (it refreshes every agent's kept offer) is over: what
    # follows is the requests' alone.
    wait_until(lambda: _passes(database_url) > 0, what="the reconcile worker's first pass")
    return World(server, str(held_org.org_id), held, str(other_org.org_id), other)


def _refused_by_the_bound(answers: list[Answer], sent: int, stderr: str) -> None:
    """Every one answered while the lock was held (the threads were joined before it was let
    go), 503, and said in the log as a statement cancelled by the lock bound: once for the
    route, the others counted (`CancelledRequests`), not a line each."""
    assert [answer.code for answer in answers] == ["database_unavailable"] * sent, answers
    assert {answer.status for answer in answers} == {503}
    said = stderr.count("POST /v1/agent/claims answered 503 database_unavailable: canceling")
    assert said == 1, stderr
    assert "canceling statement due to lock timeout" in stderr, stderr


def test_a_held_row_lock_refuses_only_the_claims_behind_it_and_only_while_it_is_held(
    control_plane_server: Callable[..., RunningControlPlane],
    pool: Pool,
    database_url: str,
) -> None:
    world = _world(control_plane_server, pool, database_url)
    url = world.server.base_url

    with psycopg.connect(database_url, autocommit=True) as operator:
        # An operator's `psql`: BEGIN; SELECT … FOR UPDATE; and off for coffee. A grant's run
        # names its agent (a foreign key): its insert waits for this lock.
        operator.execute("BEGIN")
        operator.execute(
            "SELECT id FROM agents WHERE org_id = %s FOR UPDATE", [world.held_org]
        ).fetchall()
        # As many of the held organisation's claims as the pool has connections.
        stuck_threads, stuck = _in_threads([lambda k=k: _claim(url, k) for k in world.held])
        # One of them at the lock: the others follow or already gave up (the bound is a second).
        wait_for_a_lock_wait(database_url)
        served_threads, served = _in_threads(
            [lambda k=k: _claim(url, k) for k in world.other]
            + [lambda k=k: _poll(url, k) for k in world.other]
            + [lambda: _health(url)]
        )
        for thread in [*stuck_threads, *served_threads]:
            thread.join(60)
        assert _tokens(database_url, world.held_org) == 0
        operator.execute("ROLLBACK")

    print(f"behind the lock: {stuck}\nthe others: {served}")
    _refused_by_the_bound(stuck, POOL_SIZE, world.server.stderr())
    assert (
        sorted(answer.status for answer in served) == [200] * (POOL_SIZE + 1) + [201] * POOL_SIZE
    ), served

    # The lock let go: the same claims are granted, once each.
    again = [_claim(url, k) for k in world.held]
    assert [answer.status for answer in again] == [201] * POOL_SIZE, again
    assert _tokens(database_url, world.held_org) == POOL_SIZE
    stderr = world.server.stderr()
    assert "Traceback" not in stderr, stderr
    assert "canceling statement due to lock timeout" in stderr, stderr


def test_a_held_table_lock_refuses_the_claims_and_the_polls_are_served(
    control_plane_server: Callable[..., RunningControlPlane],
    pool: Pool,
    database_url: str,
) -> None:
    """`LOCK TABLE tokens` by hand stops every grant, of every organisation: those claims are
    refused within the bound; what does not write a token — the polls, `/healthz` — is served."""
    world = _world(control_plane_server, pool, database_url)
    url = world.server.base_url
    keys = [*world.held, *world.other]
    # Claims of both organisations, as many as the pool has connections.
    claiming = [*world.held[: POOL_SIZE - 1], world.other[0]]

    with psycopg.connect(database_url, autocommit=True) as operator:
        operator.execute("BEGIN")
        operator.execute("LOCK TABLE tokens IN EXCLUSIVE MODE")  # reads pass, writes wait
        stuck_threads, stuck = _in_threads([lambda k=k: _claim(url, k) for k in claiming])
        # One of them at the lock: the others follow or already gave up (the bound is a second).
        wait_for_a_lock_wait(database_url)
        served_threads, served = _in_threads(
            [lambda k=k: _poll(url, k) for k in keys] + [lambda: _health(url)]
        )
        for thread in [*stuck_threads, *served_threads]:
            thread.join(60)
        operator.execute("ROLLBACK")

    print(f"behind the lock: {stuck}\nthe others: {served}")
    _refused_by_the_bound(stuck, POOL_SIZE, world.server.stderr())
    assert [answer.status for answer in served] == [200] * (len(keys) + 1), served
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (0,)
    again = [_claim(url, k) for k in keys]
    assert [answer.status for answer in again] == [201] * len(keys), again
    assert "Traceback" not in world.server.stderr()
