"""Real `nachtwacht control serve` processes over one database: what one replica writes, the
other's memory honours within its bound; a replica whose database is gone answers 503, not
from memory. Each waits for the outcome with a deadline (a hang fails, not a slow machine)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import httpx
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from control_plane.database import open_pool
from control_plane.registry import build_services
from control_plane.types import Pool
from ground.clock import SystemClock
from ground.contract import CONFIG_PATH
from tests.conftest import RunningControlPlane

pytestmark = pytest.mark.slow

# Generous: the bound is seconds; the deadline only stops a test that would otherwise hang.
DEADLINE_SECONDS = 60.0


@pytest.fixture
def pool(database_url: str) -> Iterator[Pool]:
    opened = open_pool(database_url, min_size=1, max_size=2)
    try:
        yield opened
    finally:
        opened.close()


def _statuses_until(poll: Callable[[], int], wanted: int) -> list[int]:
    """Every status `poll` gave until it gave `wanted` (or the deadline passed)."""
    seen: list[int] = []
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        seen.append(poll())
        if seen[-1] == wanted:
            break
        time.sleep(0.1)
    return seen


def test_a_credential_revoked_on_one_replica_is_refused_by_the_other(
    control_plane_server: Callable[..., RunningControlPlane], pool: Pool
) -> None:
    services = build_services(pool)
    now = SystemClock().now()
    org = services.accounts.create_org("Acme", now=now)
    agent = services.accounts.enroll_agent(org.org_id, "web-01", now=now)
    operator_key = services.accounts.create_operator_key("tests")
    (credential,) = services.accounts.list_credentials(agent_id=agent.agent_id).credentials
    first, second = control_plane_server(), control_plane_server()

    with httpx.Client(
        base_url=second.base_url, headers={"Authorization": f"Bearer {agent.agent_key}"}
    ) as polling:
        etag = polling.get(CONFIG_PATH).headers["etag"]
        assert polling.get(CONFIG_PATH, headers={"If-None-Match": etag}).status_code == 304
        with httpx.Client(
            base_url=first.base_url, headers={"Authorization": f"Bearer {operator_key}"}
        ) as operator:
            revoked = operator.post(f"/v1/admin/credentials/{credential.id}/revoke")
            assert revoked.status_code == 200

        statuses = _statuses_until(
            lambda: polling.get(CONFIG_PATH, headers={"If-None-Match": etag}).status_code, 401
        )
    assert statuses[-1] == 401, statuses
    assert set(statuses) <= {304, 401}, statuses


def test_a_replica_whose_database_is_gone_answers_503_not_from_memory(
    control_plane_server: Callable[..., RunningControlPlane],
    pool: Pool,
    database_url: str,
    postgres_admin_url: str,
) -> None:
    services = build_services(pool)
    now = SystemClock().now()
    org = services.accounts.create_org("Acme", now=now)
    agent = services.accounts.enroll_agent(org.org_id, "web-01", now=now)
    replica = control_plane_server()
    pool.close()
    name = conninfo_to_dict(database_url)["dbname"]

    with httpx.Client(
        base_url=replica.base_url,
        headers={"Authorization": f"Bearer {agent.agent_key}"},
        timeout=DEADLINE_SECONDS,
    ) as polling:
        etag = polling.get(CONFIG_PATH).headers["etag"]
        assert polling.get(CONFIG_PATH, headers={"If-None-Match": etag}).status_code == 304
        with psycopg.connect(postgres_admin_url, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                [name],
            )
            try:
                statuses = _statuses_until(
                    lambda: polling.get(CONFIG_PATH, headers={"If-None-Match": etag}).status_code,
                    503,
                )
                after = polling.get(CONFIG_PATH, headers={"If-None-Match": etag}).status_code
            finally:
                admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
    assert statuses[-1] == 503, statuses
    assert after == 503  # the memory did not come back while the database was away
