"""A host whose clock is wrong, end to end: real daemons on a shifted fake clock against a real
control plane on the embedded PostgreSQL (its reconcile worker included), over loopback.

A host more than a day off claims no slot on its wrong clock (it would be another day's): tonight's
is recorded `host_clock`, with the offset its polls' `Date` header showed. A host whose clock is
right, and a host whose daemon never runs, keep the reasons they had.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest

from tests.agent_daemon.daemon_support.night import Night, NightClock, local

pytestmark = pytest.mark.slow

SLOT = "2026-11-30T03:00"
THREE_DAYS = timedelta(days=3)


@pytest.fixture
def night(tmp_path: Path, control_plane_server: Callable[..., Any]) -> Iterator[Night]:
    clock = NightClock.held(local("2026-11-30T02:57"), begins=tmp_path / "clock", speed=60.0)
    scenario = Night(root=tmp_path / "night", clock=clock, start_control_plane=control_plane_server)
    yield scenario
    scenario.close()


def slot_runs(night: Night, host: Any) -> list[tuple[str, str | None]]:
    return [
        (run["status"], run["miss_reason"]) for run in night.runs(host) if run["slot_key"] == SLOT
    ]


def wait_for_the_pass(night: Night, *hosts: Any) -> None:
    """Until the worker's pass after the window (03:15) recorded each host's slot."""
    while not all(slot_runs(night, host) for host in hosts):
        assert night.clock.now() < local("2026-11-30T03:40"), "no pass recorded the slot"
        night.clock.wait_until(night.clock.now() + timedelta(minutes=1))


def miss_event(night: Night, host: Any) -> dict[str, Any]:
    with psycopg.connect(night.plane.database_url) as conn:
        row = conn.execute(
            "SELECT data FROM events WHERE agent_id = %s AND kind = 'update.missed'",
            [UUID(host.agent_id)],
        ).fetchone()
    assert row is not None
    data: dict[str, Any] = row[0]
    return data


def test_a_host_days_behind_misses_as_host_clock_and_a_right_one_updates(night: Night) -> None:
    night.publish("1.5.0", 42)
    wrong = night.add_host("web-01")
    right = night.add_host("web-02")
    switched_off = night.add_host("web-03")
    wrong_daemon = wrong.start(clock_setting=night.clock.shifted(-THREE_DAYS).setting)
    right_daemon = right.start()
    # The daemon says it, too: beyond the bound it follows.
    disagrees = wrong_daemon.wait_for("clock.disagrees")
    assert abs(disagrees["measured_offset_seconds"] - THREE_DAYS.total_seconds()) < 120
    right_daemon.wait_for("report.delivered", slot_key=SLOT, status="succeeded")

    wait_for_the_pass(night, wrong, right, switched_off)
    # Another day's slot is neither claimed nor consumed on a clock it cannot follow: once the
    # clock is right, tonight's slots are taken again (tests/agent_daemon/minute/test_clock_jumps).
    assert [name for name in wrong_daemon.event_names() if name.startswith("claim.")] == []
    assert slot_runs(night, wrong) == [("missed", "host_clock")]
    assert slot_runs(night, right) == [("succeeded", None)]
    assert slot_runs(night, switched_off) == [("missed", "offline")]
    event = miss_event(night, wrong)
    assert event["reason"] == "host_clock"
    # Host minus control plane, as the `Date` header of its polls showed it (to the second, and
    # a product second is a sixtieth of a real one here).
    assert abs(event["host_clock_offset_seconds"] + THREE_DAYS.total_seconds()) < 120
