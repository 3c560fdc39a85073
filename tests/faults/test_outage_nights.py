"""Outage nights with every part real: the embedded PostgreSQL stopped under a running
control plane, the control plane SIGKILLed and restarted, a daemon SIGSTOPped — each while a
download is held mid-body by the throttling proxy, so "mid-download" is a real moment.

Each test ends as every fault test does: the slot has exactly one run and it says what happened,
its timeline says the same, nothing switched outside the window, `current` names one complete
version, and nothing is left running (checked when the night closes).
"""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_daemon.host.status import describe_reason
from control_plane.database import process_exists
from ground.clock import FAKE_CLOCK_ENV
from ground.contract import OutcomeReason
from tests.agent_daemon.daemon_support.features import needs_confirm_route
from tests.faults.night_record import (
    WIDE_WINDOW_CLOSES,
    run_events,
    the_one_run,
    wait_for_run,
    widen_window,
)
from tests.faults.world import SLOT, FaultNight, assert_safe, fault_night
from tests.worlds.waiting import wait_until

pytestmark = [pytest.mark.slow, needs_confirm_route]

# A deadline for a failure, not a speed expectation.
_DEADLINE_SECONDS = 60.0
# The timeline of a run that switched inside its window: the claim, then its one outcome.
SUCCEEDED_EVENTS = [("update.scheduled", None), ("update.succeeded", None)]


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    wait_until(condition, what=what, timeout=_DEADLINE_SECONDS)


def _postmaster_pid(pgdata: Path) -> int | None:
    try:
        return int((pgdata / "postmaster.pid").read_text().splitlines()[0])
    except (FileNotFoundError, IndexError, ValueError):
        return None


@pytest.fixture
def night(tmp_path: Path, control_plane_server: Callable[..., Any]) -> Iterator[FaultNight]:
    with fault_night(tmp_path / "night", control_plane_server) as world:
        yield world


@pytest.fixture
def embedded_night(
    tmp_path: Path, control_plane_server: Callable[..., Any], embedded_data_dir: Path
) -> Iterator[FaultNight]:
    """A night whose control plane runs its own embedded PostgreSQL, which the test may stop."""
    start = functools.partial(control_plane_server, data_dir=embedded_data_dir)
    pgdata = embedded_data_dir / "postgres"
    try:
        with fault_night(tmp_path / "night", start) as world:
            yield world
    finally:
        pid = _postmaster_pid(pgdata)
        if pid is not None and process_exists(pid):  # a failed test's PostgreSQL is ended
            os.kill(pid, signal.SIGINT)
            _wait_until(lambda: not process_exists(pid), "the left-over PostgreSQL to stop")


def test_postgres_stopped_mid_download_and_started_inside_the_window_resumes_and_switches(
    embedded_night: FaultNight, embedded_data_dir: Path
) -> None:
    night = embedded_night
    widen_window(night)
    host = night.add_host("web-01")
    night.proxy.hold_after(1024)
    daemon = host.start()
    granted = daemon.wait_for("claim.granted", slot_key=SLOT)
    night.proxy.wait_until_held()
    postgres = _postmaster_pid(embedded_data_dir / "postgres")
    assert postgres is not None
    os.kill(postgres, signal.SIGINT)  # PostgreSQL's fast shutdown, under the running server
    _wait_until(lambda: not process_exists(postgres), "PostgreSQL to stop")
    night.proxy.cut()  # the download in flight drops; every request now meets the outage
    retrying = daemon.wait_for("update.retrying", run_id=granted["run_id"])
    unavailable = daemon.wait_for("update.retrying", run_id=granted["run_id"], count=2)
    assert unavailable["reason"] == "platform_unavailable", unavailable
    night.night.plane.create_org("Beta")  # an admin command starts PostgreSQL again
    succeeded = daemon.wait_for("update.succeeded", run_id=granted["run_id"])
    daemon.wait_for("report.delivered", run_id=granted["run_id"])

    assert retrying["reason"] in {"download_failed", "platform_unavailable"}, retrying
    ranges = [request.range for request in night.proxy.artifacts() if request.status in {200, 206}]
    assert ranges[0] is None and "bytes=1024-" in ranges[1:], "the download resumed"
    assert len(daemon.named("claim.granted")) == 1
    run = the_one_run(night, host)
    assert (run["status"], run["version"], run["reason"]) == ("succeeded", "1.5.0", None)
    assert run["switched_at"] == succeeded["switched_at"] is not None
    assert host.current_version() == host.running_version() == "1.5.0"
    assert run_events(night, host, granted["run_id"]) == SUCCEEDED_EVENTS
    assert_safe(host, window_closes=WIDE_WINDOW_CLOSES)


def test_control_plane_killed_mid_download_and_restarted_inside_the_window_switches(
    night: FaultNight,
) -> None:
    widen_window(night)
    host = night.add_host("web-01")
    night.proxy.hold_after(1024)
    daemon = host.start()
    granted = daemon.wait_for("claim.granted", slot_key=SLOT)
    night.proxy.wait_until_held()
    _kill_control_plane(night)
    night.proxy.cut()
    daemon.wait_for("update.retrying", run_id=granted["run_id"])
    _restart_control_plane(night)
    succeeded = daemon.wait_for("update.succeeded", run_id=granted["run_id"])
    daemon.wait_for("report.delivered", run_id=granted["run_id"])

    assert len(daemon.named("claim.granted")) == 1
    ranges = [request.range for request in night.proxy.artifacts() if request.status in {200, 206}]
    assert ranges[0] is None and "bytes=1024-" in ranges[1:], "the download resumed"
    run = the_one_run(night, host)
    assert (run["status"], run["version"]) == ("succeeded", "1.5.0")
    assert run["switched_at"] == succeeded["switched_at"] is not None
    assert host.current_version() == host.running_version() == "1.5.0"
    assert run_events(night, host, granted["run_id"]) == SUCCEEDED_EVENTS
    assert_safe(host, window_closes=WIDE_WINDOW_CLOSES)


def test_control_plane_killed_mid_download_and_back_only_after_the_window_never_switches(
    night: FaultNight,
) -> None:
    host = night.add_host("web-01")
    night.proxy.hold_after(1024)
    daemon = host.start()
    granted = daemon.wait_for("claim.granted", slot_key=SLOT)
    night.proxy.wait_until_held()
    _kill_control_plane(night)
    night.proxy.cut()
    ended = daemon.wait_for("update.failed", run_id=granted["run_id"])
    night.wait_until("2026-11-30T03:17")
    _restart_control_plane(night)
    daemon.wait_for("report.delivered", run_id=granted["run_id"])

    # The agent reports the last failure that might have passed: to it a control plane that does
    # not answer at all cannot be told from its own network failing, so it is the download's.
    # The control plane knows better from its own liveness marks — it was down in the window —
    # and records `platform_unavailable`: never `offline`, never the customer's side.
    assert ended["reason"] == "download_failed", ended
    assert daemon.named("swap.permitted") == []
    run = wait_for_run(night, host, "failed")
    assert run["reason"] == "platform_unavailable"
    assert run["miss_reason"] != "offline"
    assert run["switched_at"] is None
    assert run_events(night, host, granted["run_id"]) == [
        ("update.scheduled", None),
        ("update.failed", "platform_unavailable"),
    ]
    assert len(daemon.named("claim.granted")) == 1
    assert host.current_version() == host.running_version() == "1.4.1"
    assert not (host.agent.install_root / "versions" / "1.5.0" / ".complete").exists()
    assert_safe(host)


def test_a_daemon_stopped_mid_download_and_continued_after_its_window_never_switches(
    night: FaultNight,
) -> None:
    host = night.add_host("web-01")
    night.proxy.hold_after(1024)
    daemon = host.start()
    granted = daemon.wait_for("claim.granted", slot_key=SLOT)
    night.proxy.wait_until_held()
    daemon.process.send_signal(signal.SIGSTOP)
    try:
        night.proxy.release()  # the rest of the build waits in the socket for a frozen reader
        night.wait_until("2026-11-30T03:17")
    finally:
        daemon.process.send_signal(signal.SIGCONT)
    ended = daemon.wait_for("update.failed", run_id=granted["run_id"])
    daemon.wait_for("report.delivered", run_id=granted["run_id"])

    # To the daemon the build came whole and the control plane refused its switch: the window
    # had closed (a frozen process cannot tell it was frozen).
    assert ended["reason"] == "window_closed", ended
    assert daemon.named("swap.permitted") == []
    run = wait_for_run(night, host, "failed")
    assert run["reason"] == "window_closed"
    assert run["switched_at"] is None
    assert run_events(night, host, granted["run_id"]) == [
        ("update.scheduled", None),
        ("update.failed", "window_closed"),
    ]
    assert len(daemon.named("claim.granted")) == 1
    assert host.current_version() == host.running_version() == "1.4.1"
    # `agent status` says it in words, first among what is wrong.
    shown = host.agent.status(env={FAKE_CLOCK_ENV: night.night.clock.setting})
    assert shown.returncode == 0, shown.stderr
    attention = shown.stdout.split("attention:")[1].split("daemon:")[0]
    assert (
        "the last run did not update: 2026-11-30 03:00 CET — update failed (1.4.1), because "
        f"{describe_reason(OutcomeReason.WINDOW_CLOSED)}" in attention
    )
    assert_safe(host)


def _kill_control_plane(night: FaultNight) -> None:
    plane = night.night.plane
    plane.process.send_signal(signal.SIGKILL)
    plane.process.wait()
    plane.detach()


def _restart_control_plane(night: FaultNight) -> None:
    """The same database, a new port: the proxy and the panel's clients follow it."""
    night.night.restart_control_plane()
    url = night.night.plane.base_url
    night.proxy.point_at(url)
    night.night.panel.base_url = httpx.URL(url)
    night.night.operator.base_url = httpx.URL(url)
