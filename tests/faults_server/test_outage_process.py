"""Our outage is not the customer's miss, with real processes: `control serve`
on a fast clock is SIGKILLed one minute into an agent's window and started again after the window
closed; the worker of the restarted server records the miss as `platform_unavailable`.

The slot is chosen from the server's own clock once it is up, so a slow start on a busy machine
moves the night rather than breaking the test. No timed assertions: the loops wait for a state.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from ground.clock import FakeClock
from ground.contract import SERVER_TIME_HEADER, parse_instant
from tests.conftest import RunningControlPlane
from tests.worlds.waiting import wait_until

# A control plane killed and started again through a window: ~30 s, started first.
pytestmark = pytest.mark.slow

SPEED = 60.0  # a product minute is a real second
DEADLINE_SECONDS = 120.0
AMSTERDAM = ZoneInfo("Europe/Amsterdam")


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    wait_until(condition, what=what, timeout=DEADLINE_SECONDS, interval=0.1)


def _server_now(base_url: str) -> datetime:
    response = httpx.get(f"{base_url}/healthz", timeout=30)
    return parse_instant(response.headers[SERVER_TIME_HEADER])


def _missed(database_url: str, agent_id: str) -> list[dict[str, Any]]:
    with psycopg.connect(database_url, row_factory=dict_row) as conn:
        return conn.execute(
            "SELECT slot_key, miss_reason FROM runs WHERE agent_id = %s AND status = 'missed'",
            [agent_id],
        ).fetchall()


def test_a_window_the_control_plane_was_killed_through_is_platform_unavailable(
    control_plane_server: Callable[..., RunningControlPlane], database_url: str
) -> None:
    clock = FakeClock(
        start=datetime(2026, 11, 30, 1, 0, tzinfo=UTC), anchor=time.time(), speed=SPEED
    )
    first = control_plane_server(fake_clock=clock.setting())
    org = first.create_org("Acme")
    agent = first.enroll_agent(org["org_id"], "web-01")
    # The next slot on the five-minute grid at least three product minutes away.
    soon = _server_now(first.base_url) + timedelta(minutes=3)
    slot_at = soon.replace(second=0, microsecond=0) + timedelta(minutes=5 - soon.minute % 5)
    wall = slot_at.astimezone(AMSTERDAM).strftime("%H:%M")
    with psycopg.connect(database_url) as conn:
        conn.execute(
            "UPDATE agents SET update_schedule_times = %s WHERE id = %s",
            [Jsonb([wall]), agent["agent_id"]],
        )
    _wait_until(lambda: clock.now() >= slot_at + timedelta(minutes=1), "a minute into the window")
    first.process.send_signal(signal.SIGKILL)
    first.process.wait()
    first.detach()
    _wait_until(lambda: clock.now() >= slot_at + timedelta(minutes=17), "the window to close")
    second = control_plane_server(fake_clock=clock.setting())
    _wait_until(lambda: bool(_missed(database_url, agent["agent_id"])), "the miss to be recorded")
    [missed] = _missed(database_url, agent["agent_id"])
    assert missed["miss_reason"] == "platform_unavailable"
    assert second.stop() == 0
