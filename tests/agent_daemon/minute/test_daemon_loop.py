"""The service shell: a stable second per agent, the minute on the server's (fast) clock, one
daemon per state directory, systemd's notify datagrams."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.errors import DaemonAlreadyRunning
from agent_daemon.host.systemd_notify import Notifier
from agent_daemon.minute.daemon_loop import (
    DaemonLock,
    ServerMinuteTrigger,
    daemon_running,
    second_in_minute,
)
from ground.clock import FakeClock
from tests.worlds.clocks import ManualClock


def test_the_second_in_the_minute_is_stable_per_agent_and_spreads_a_fleet() -> None:
    assert second_in_minute("agent-a") == second_in_minute("agent-a")
    seconds = {second_in_minute(f"agent-{n}") for n in range(200)}
    assert all(0 <= s < 60 for s in seconds)
    assert len(seconds) > 40


def test_the_trigger_fires_at_the_agents_second_of_each_server_minute() -> None:
    host = ManualClock(datetime(2026, 11, 30, 1, 59, 50, tzinfo=UTC))
    trigger = ServerMinuteTrigger(ServerClock(host, offset=timedelta(seconds=5)), 17)
    first = trigger.next_product_instant(host.now() + timedelta(seconds=5))
    assert first == datetime(2026, 11, 30, 2, 0, 17, tzinfo=UTC)


def test_the_trigger_never_fires_twice_in_one_minute() -> None:
    host = ManualClock(datetime(2026, 11, 30, 2, 0, 16, 999000, tzinfo=UTC))
    trigger = ServerMinuteTrigger(ServerClock(host), 17)
    fired_at = datetime(2026, 1, 1, tzinfo=UTC)
    # The job ran for 02:00:17 a hair early by the product clock (rounding between real and
    # product time): the next fire is the next minute, not 02:00:17 again.
    fire = trigger.get_next_fire_time(fired_at, fired_at)
    assert fire is not None
    assert fire - fired_at > timedelta(seconds=60)


def test_the_trigger_fires_every_minute_when_asked_twice_for_one_fire_time() -> None:
    # APScheduler asks for the next fire time twice after each run (once while collecting run
    # times, once to store); a trigger with hidden state would skip every other minute.
    host = ManualClock(datetime(2026, 11, 30, 2, 0, 17, 300000, tzinfo=UTC))
    trigger = ServerMinuteTrigger(ServerClock(host), 17)
    fired_at = datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC)
    now = fired_at + timedelta(seconds=0.3)
    first = trigger.get_next_fire_time(fired_at, now)
    second = trigger.get_next_fire_time(fired_at, now)
    assert first == second == now + timedelta(seconds=59.7)


def test_the_trigger_waits_in_real_seconds_of_a_fast_clock() -> None:
    fake = FakeClock(start=datetime(2026, 11, 30, 2, 0, 0, tzinfo=UTC), anchor=0.0, speed=60.0)
    trigger = ServerMinuteTrigger(ServerClock(fake), 30)
    real_now = datetime(2026, 1, 1, tzinfo=UTC)
    fire = trigger.get_next_fire_time(None, real_now)
    assert fire is not None
    # Any product wait under one minute is under one real second at 60x.
    assert timedelta(0) < fire - real_now <= timedelta(seconds=1)


def test_one_daemon_per_state_directory(tmp_path: Path) -> None:
    assert daemon_running(tmp_path) is None
    first = DaemonLock(tmp_path)
    first.acquire()
    try:
        assert daemon_running(tmp_path) is not None
        with pytest.raises(DaemonAlreadyRunning, match="another agent daemon"):
            DaemonLock(tmp_path).acquire()
    finally:
        first.release()
    assert daemon_running(tmp_path) is None


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    path = str(tmp_path / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(5)
    yield sock, path
    sock.close()


def test_systemd_hears_ready_watchdog_and_stopping(
    notify_socket: tuple[socket.socket, str],
) -> None:
    sock, path = notify_socket
    notifier = Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "30000000"})
    assert notifier.watchdog_interval == 15.0
    assert notifier.ready("ticking")
    assert sock.recv(256).startswith(b"READY=1\n")
    assert notifier.watchdog()
    assert sock.recv(256) == b"WATCHDOG=1"
    assert notifier.stopping()
    assert sock.recv(256) == b"STOPPING=1"


def test_outside_systemd_notify_does_nothing() -> None:
    notifier = Notifier({})
    assert not notifier.enabled
    assert not notifier.ready("x")
    assert notifier.watchdog_interval is None
