"""The whole database server stops under a serving control plane, and starts again: the poll, a
claim and a report asked meanwhile are each a 503 with the contract's error body within seconds,
none half-written, and the same server serves them once the database is back, without a restart.
The test's database is a server of its own here (`database_url` below), so it can be stopped."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import httpx
import pytest

from control_plane import migrate
from control_plane.types import Pool
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease, table_rows
from tests.worlds.clocks import ManualClock
from tests.worlds.processes import REPO_ROOT, child_environment, nachtwacht_command
from tests.worlds.replicated_postgres import ArchivedPrimary, archived_primary
from tests.worlds.waiting import wait_until

pytestmark = pytest.mark.slow

SLOT = "2026-11-30T03:00"
WATCHED = ("runs", "tokens", "events", "agents", "claim_refusals", "agent_hosts")
# How long a request may take to be refused while the server is down: seconds, not minutes.
REFUSED_WITHIN_SECONDS = 15.0


@pytest.fixture
def servers() -> Iterator[ArchivedPrimary]:
    with archived_primary() as started:
        migrate.upgrade(started.primary.url)
        yield started


@pytest.fixture
def database_url(servers: ArchivedPrimary) -> str:
    """The stoppable server's database, migrated: every fixture of the control plane's tests
    (the pool, the services, the API) stands on it."""
    return servers.primary.url


def _unavailable(response: httpx.Response, took: float) -> None:
    assert response.status_code == 503, response.text[:2000]
    detail = response.json()["detail"]
    assert detail["code"] == "database_unavailable", detail
    assert detail["message"], detail
    assert "Traceback" not in response.text
    assert took < REFUSED_WITHIN_SECONDS, took


def test_a_stopped_database_is_a_503_for_poll_claim_and_report_and_served_again_after(
    api: Api,
    pool: Pool,
    servers: ArchivedPrimary,
    clock: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    del published
    org = make_org()
    reporting, claiming = make_agent(org, "web-01"), make_agent(org, "web-02")
    clock.set(datetime(2026, 11, 30, 2, 1, tzinfo=UTC))
    claim = {"slot_key": SLOT, "from_version": "1.4.1"}
    report = {"status": "succeeded", "version": "1.5.0", "switched_at": "2026-11-30T02:03:00Z"}
    with api.client(reporting.agent_key) as client:
        granted = client.post("/v1/agent/claims", json=claim)
        assert granted.status_code == 201, granted.text
        # Polled once: an answer the server may keep in memory.
        assert client.get("/v1/agent/config").status_code == 200
    run_id = granted.json()["run_id"]
    before = table_rows(pool, WATCHED)

    requests: dict[str, Callable[[], httpx.Response]] = {
        "poll": lambda: httpx.get(
            f"{api.base_url}/v1/agent/config",
            headers={"Authorization": f"Bearer {reporting.agent_key}"},
            timeout=60,
        ),
        "claim": lambda: httpx.post(
            f"{api.base_url}/v1/agent/claims",
            headers={"Authorization": f"Bearer {claiming.agent_key}"},
            json=claim,
            timeout=60,
        ),
        "report": lambda: httpx.patch(
            f"{api.base_url}/v1/agent/runs/{run_id}",
            headers={"Authorization": f"Bearer {reporting.agent_key}"},
            json=report,
            timeout=60,
        ),
    }
    servers.stop(servers.primary)
    for name, send in requests.items():
        started = time.monotonic()
        response = send()
        _unavailable(response, time.monotonic() - started)
        print(f"{name}: 503 after {time.monotonic() - started:.2f} s")

    servers.start(servers.primary)
    assert table_rows(pool, WATCHED) == before
    wait_until(
        lambda: requests["poll"]().status_code == 200,
        what="the poll served again",
        timeout=30,
        interval=0.2,
    )
    claimed = requests["claim"]()
    assert claimed.status_code == 201, claimed.text[:2000]
    reported = requests["report"]()
    assert reported.status_code == 200, reported.text[:2000]
    with pool.connection() as conn:
        runs = conn.execute(
            "SELECT agent_id::text AS agent, status FROM runs ORDER BY agent_id"
        ).fetchall()
    assert sorted((row["agent"], row["status"]) for row in runs) == sorted(
        [(reporting.agent_id, "succeeded"), (claiming.agent_id, "claimed")]
    )


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["brake", "show"], id="brake_show"),
        pytest.param(["brake", "engage", "--reason", "disk full"], id="brake_engage"),
        pytest.param(["create-org", "Acme"], id="create_org"),
        pytest.param(["after-restore"], id="after_restore"),
    ],
)
def test_a_command_against_a_stopped_database_says_one_line(
    servers: ArchivedPrimary, database_url: str, pool: Pool, command: list[str]
) -> None:
    before = table_rows(pool, ("platform_brake", "orgs", "events", "restored_timelines"))
    servers.stop(servers.primary)
    done = subprocess.run(
        nachtwacht_command("control", *command, "--database-url", database_url),
        env=child_environment(),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"nachtwacht control {command[0]}"), lines
    assert "cannot connect to the database at " in lines[0], lines
    assert "connection refused — check that PostgreSQL runs on that host" in lines[0], lines
    assert done.stdout == ""
    servers.start(servers.primary)
    assert table_rows(pool, ("platform_brake", "orgs", "events", "restored_timelines")) == before
