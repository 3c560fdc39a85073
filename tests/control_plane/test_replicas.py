"""Two `nachtwacht control serve` processes over one database hold the caps exactly,
with one worker each and with several workers each (`--workers`)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from uuid import UUID

import httpx
import psutil
import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.answers_cache import FRESHNESS_SECONDS
from control_plane.database import open_pool
from control_plane.registry import build_services
from control_plane.types import Pool
from signed_release.keys import key_id
from tests.conftest import RunningControlPlane
from tests.control_plane.conftest import sign_release
from tests.worlds.waiting import wait_until

pytestmark = pytest.mark.slow

ORGS = 6
AGENTS_PER_ORG = 5
ORG_CAP = 3
GLOBAL_CAP = 10


@pytest.fixture
def pool(database_url: str) -> Iterator[Pool]:
    opened = open_pool(database_url, min_size=1, max_size=2)
    try:
        yield opened
    finally:
        opened.close()


def _body(response: httpx.Response) -> dict[str, object]:
    try:
        body: dict[str, object] = response.json()
    except ValueError:
        return {"text": response.text}
    return body


@pytest.mark.parametrize(
    "workers", [pytest.param(1, id="one_worker_each"), pytest.param(2, id="two_workers_each")]
)
def test_two_replicas_grant_exactly_the_caps(
    control_plane_server: Callable[..., RunningControlPlane],
    pool: Pool,
    database_url: str,
    workers: int,
) -> None:
    key = Ed25519PrivateKey.generate()
    services = build_services(pool, {key_id(key.public_key()): key.public_key()})
    # The product time the replicas show, not the machine's date: the release is valid until
    # 2027-11-01, and publishing at a real `now` would refuse it as expired from then on.
    now = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
    release = sign_release(key)
    services.releases.publish(release.manifest, release.signature, release.artifact, now=now)
    agents: list[tuple[str, str]] = []  # (org id, agent key)
    for o in range(ORGS):
        org = services.accounts.create_org(f"Org {o}", now=now)
        for n in range(AGENTS_PER_ORG):
            issued = services.accounts.enroll_agent(org.org_id, f"web-{n}", now=now)
            agents.append((str(org.org_id), issued.agent_key))

    # Both replicas show the same product time, almost frozen at 03:01 CET: one round.
    fake_clock = f"2026-11-30T02:01:00Z,anchor={time.time()!r},speed=0.001"
    flags = ["--org-cap", str(ORG_CAP), "--global-cap", str(GLOBAL_CAP), "--workers", str(workers)]
    replicas = [control_plane_server(fake_clock=fake_clock, args=flags) for _ in range(2)]
    for replica in replicas:
        # `--workers 1` serves in the process itself; more are its children, one pool each.
        expected_children = 0 if workers == 1 else workers
        assert len(_serving_children(replica.pid)) == expected_children

    start = threading.Barrier(len(agents))
    answers: list[tuple[str, str, int, dict[str, object]]] = []
    lock = threading.Lock()

    def claim(index: int, org_id: str, agent_key: str) -> None:
        replica = replicas[index % 2]
        with httpx.Client(base_url=replica.base_url, timeout=60) as client:
            start.wait()
            response = client.post(
                "/v1/agent/claims",
                headers={"Authorization": f"Bearer {agent_key}"},
                json={"slot_key": "2026-11-30T03:00", "from_version": "1.4.1"},
            )
        with lock:
            answers.append((org_id, agent_key, response.status_code, _body(response)))

    threads = [
        threading.Thread(target=claim, args=(index, org_id, agent_key))
        for index, (org_id, agent_key) in enumerate(agents)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    for replica in replicas:
        assert "Traceback" not in replica.stderr(), replica.stderr()
    granted = [answer for answer in answers if answer[2] == 201]
    refused = [answer for answer in answers if answer[2] != 201]
    assert len(granted) == GLOBAL_CAP
    assert max(Counter(org_id for org_id, *_ in granted).values()) <= ORG_CAP
    assert {answer[2] for answer in refused} == {429}
    assert {str(answer[3]["detail"]) for answer in refused} != set()
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM tokens").fetchone() == (GLOBAL_CAP,)
        per_org = conn.execute("SELECT max(granted) FROM claim_rounds_org").fetchone()
        assert per_org is not None and per_org[0] <= ORG_CAP

    # A granted agent that asks the other replica gets its own claim back, not a second one —
    # once the grant is older than the answer memory's bound: within it, the other replica may
    # still answer from what it read before the grant (the round full: a 429 to retry).
    _, agent_key, _, first = granted[0]
    with httpx.Client(base_url=replicas[1].base_url) as client:

        def claim_again() -> httpx.Response | None:
            answer = client.post(
                "/v1/agent/claims",
                headers={"Authorization": f"Bearer {agent_key}"},
                json={"slot_key": "2026-11-30T03:00", "from_version": "1.4.1"},
            )
            assert answer.status_code in {200, 429}, answer.text
            return answer if answer.status_code == 200 else None

        again = wait_until(
            claim_again,
            what="the grant to pass the answer memory's bound",
            timeout=FRESHNESS_SECONDS + 30,
        )
    assert again.json()["run_id"] == first["run_id"]
    assert UUID(again.json()["token"]["id"])

    # A clean stop takes every worker with it.
    for replica in replicas:
        children = _serving_children(replica.pid)
        assert replica.stop() == 0
        assert not [
            child for child in children if child.is_running() and child.status() != "zombie"
        ]


def _serving_children(pid: int) -> list[psutil.Process]:
    """The server's worker processes: forked, so with its command line (the embedded PostgreSQL
    is not its child here)."""
    server = psutil.Process(pid)
    return [child for child in server.children() if child.cmdline() == server.cmdline()]
