"""A real `nachtwacht control serve` with two workers: an agent's report recorded by one worker is
honoured by the agent's next claim whichever worker takes it, before any change feed is read
again. Every request is a connection of its own, so the kernel hands each to either worker."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from control_plane.database import open_pool
from control_plane.registry import build_services
from control_plane.types import Pool
from ground.clock import FakeClock
from ground.contract import CLAIMS_PATH, RUNS_PATH
from tests.conftest import RunningControlPlane

pytestmark = pytest.mark.slow

SLOT = "2026-11-30T03:00"
SLOT_AT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)  # 03:00 in Amsterdam
AGENTS = 6
ASKS_BEFORE = 6  # claims per agent before its report: both workers remember its facts


@pytest.fixture
def pool(database_url: str) -> Iterator[Pool]:
    opened = open_pool(database_url, min_size=1, max_size=2)
    try:
        yield opened
    finally:
        opened.close()


def _once(base_url: str, key: str, path: str, body: dict[str, str]) -> tuple[int, str]:
    with httpx.Client(
        base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30
    ) as client:
        answer = client.post(path, json=body)
    code = answer.json()["detail"]["code"] if answer.status_code >= 400 else ""
    return answer.status_code, code


def test_a_claim_after_an_up_to_date_report_is_slot_consumed_on_every_worker(
    control_plane_server: Callable[..., RunningControlPlane], pool: Pool
) -> None:
    services = build_services(pool)
    now = SLOT_AT + timedelta(minutes=1)
    org = services.accounts.create_org("Acme", now=now)
    keys = [
        services.accounts.enroll_agent(org.org_id, f"web-{n:02d}", now=now).agent_key
        for n in range(AGENTS)
    ]
    with pool.connection() as conn:  # every round of the window full for the organisation
        for minute in range(15):
            conn.execute(
                "INSERT INTO claim_rounds_org (round_start, org_id, granted)"
                " SELECT %s, %s, org_cap FROM platform_settings",
                [SLOT_AT + timedelta(minutes=minute), org.org_id],
            )
    clock = FakeClock(start=now, anchor=time.time(), speed=1.0)
    server = control_plane_server(fake_clock=clock.setting(), args=["--workers", "2"])
    claim = {"slot_key": SLOT, "from_version": "1.4.1"}
    report = {"slot_key": SLOT, "status": "up_to_date", "version": "1.5.0"}

    after_the_report = []
    for key in keys:
        before = {_once(server.base_url, key, CLAIMS_PATH, claim) for _ in range(ASKS_BEFORE)}
        assert before == {(429, "org_cap")}
        assert _once(server.base_url, key, RUNS_PATH, report) == (201, "")
        after_the_report.append(_once(server.base_url, key, CLAIMS_PATH, claim))

    assert after_the_report == [(409, "slot_consumed")] * AGENTS
