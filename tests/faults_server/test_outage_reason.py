"""A download that failed until its window closed is `platform_unavailable` when the control
plane itself was down during that window: the agent, to whom nothing answered,
cannot tell our outage from its own network, so the control plane judges it from its own
liveness marks — and keeps the agent's words beside its own."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from control_plane.liveness.marks import mark_alive
from control_plane.types import Pool
from ground.contract import run_path
from tests.control_plane.conftest import Agent, Api
from tests.faults_server.conftest import NIGHT
from tests.worlds.clocks import ManualClock

AFTER_WINDOW = NIGHT + timedelta(minutes=16)


def _marks(pool: Pool, *spans: tuple[datetime, datetime]) -> None:
    """One replica's liveness marks every 30 s through each span."""
    with pool.connection() as conn:
        started = None
        for start, end in spans:
            at = start
            while at <= end:
                started = mark_alive(conn, replica="replica-a", stretch_started=started, now=at)
                at += timedelta(seconds=30)


def _report_failed(api: Api, agent: Agent, run_id: str, reason: str) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        return client.patch(
            run_path(run_id),
            json={"status": "failed", "reason": reason, "error": "connection refused"},
        )


def _recorded(pool: Pool, run_id: str) -> tuple[Any, Any, dict[str, Any]]:
    with pool.connection() as conn:
        run = conn.execute(
            "SELECT status, outcome_reason FROM runs WHERE id = %s", [run_id]
        ).fetchone()
        event = conn.execute(
            "SELECT data FROM events WHERE run_id = %s AND kind = 'update.failed'", [run_id]
        ).fetchone()
    assert run is not None and event is not None
    return run["status"], run["outcome_reason"], event["data"]


def test_a_download_failed_through_our_outage_is_platform_unavailable(
    api: Api, agent: Agent, claimed: dict[str, Any], clock: ManualClock, pool: Pool
) -> None:
    # Up until 02:02 (the grant was at 02:01), SIGKILLed, back only after the window at 02:16.
    _marks(pool, (NIGHT - timedelta(hours=1), NIGHT + timedelta(minutes=2)))
    clock.set(AFTER_WINDOW)
    _marks(pool, (AFTER_WINDOW, AFTER_WINDOW))
    response = _report_failed(api, agent, claimed["run_id"], "download_failed")
    assert response.status_code == 200, response.text
    status, reason, event = _recorded(pool, claimed["run_id"])
    assert (status, reason) == ("failed", "platform_unavailable")
    assert (event["reason"], event["agent_reason"]) == ("platform_unavailable", "download_failed")


@pytest.mark.parametrize(
    "reason", ["download_failed", "verification_failed", "disk_full", "platform_unavailable"]
)
def test_with_the_control_plane_up_through_the_window_the_agents_reason_stands(
    api: Api, agent: Agent, claimed: dict[str, Any], clock: ManualClock, pool: Pool, reason: str
) -> None:
    _marks(pool, (NIGHT - timedelta(hours=1), AFTER_WINDOW))
    clock.set(AFTER_WINDOW)
    response = _report_failed(api, agent, claimed["run_id"], reason)
    assert response.status_code == 200, response.text
    status, stored, event = _recorded(pool, claimed["run_id"])
    assert (status, stored) == ("failed", reason)
    assert "agent_reason" not in event


def test_a_failure_that_is_not_the_download_keeps_its_reason_through_an_outage(
    api: Api, agent: Agent, claimed: dict[str, Any], clock: ManualClock, pool: Pool
) -> None:
    # A build that failed its signature check is that, whatever happened to us meanwhile.
    _marks(pool, (NIGHT - timedelta(hours=1), NIGHT + timedelta(minutes=2)))
    clock.set(AFTER_WINDOW)
    _marks(pool, (AFTER_WINDOW, AFTER_WINDOW))
    response = _report_failed(api, agent, claimed["run_id"], "verification_failed")
    assert response.status_code == 200, response.text
    assert _recorded(pool, claimed["run_id"])[:2] == ("failed", "verification_failed")
