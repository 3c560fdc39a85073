"""The watchdog follows the minutes, not the main thread: a real notify socket (a datagram socket
bound here, `NOTIFY_SOCKET` pointing at it) hears `WATCHDOG=1` only while ticks complete, and
`STATUS=` saying what the daemon is doing."""

from __future__ import annotations

import io
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.connection.wire import parse_config
from agent_daemon.host.activity import Activity
from agent_daemon.host.event_log import EventLog
from agent_daemon.minute.daemon import Daemon
from agent_daemon.minute.daemon_loop import run_service, second_in_minute
from ground.clock import FakeClock
from ground.contract import AgentConfig

# Real seconds: the loop checks every half watchdog interval (0.05 s here).
WATCHDOG_USEC = "100000"
# A second: on a loaded machine the loop may start late, and its first pings must come before
# the minute counts as stuck (with 0.3 s a busy run could see "stuck" before any ping).
STUCK_AFTER = 1.0
# How long the test listens for pings that must not come: many loop periods.
QUIET_LISTEN = 1.0


class BlockingDaemon:
    """Its first minute hangs until `release` is set, like a worker thread stuck in a call."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.ticks = 0

    def start(self) -> None:
        pass

    def tick(self) -> str:
        self.ticks += 1
        if self.ticks == 1:
            self.release.wait(30)
        return "no_slot"


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    path = str(tmp_path / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(10)
    yield sock, path
    sock.close()


def _listen(
    sock: socket.socket, daemon: BlockingDaemon, stop: threading.Event, heard: list[str]
) -> None:
    """Record every datagram; once the daemon says it is stuck, listen a while, then let the
    minute finish; stop the service after the pings have come back."""
    stuck_at: float | None = None
    released = False
    try:
        while True:
            if stuck_at is not None and not released:
                sock.settimeout(max(0.01, QUIET_LISTEN - (time.monotonic() - stuck_at)))
            try:
                message = sock.recv(4096).decode()
            except TimeoutError:
                if stuck_at is not None and not released:
                    daemon.release.set()
                    released = True
                    sock.settimeout(10)
                    continue
                return
            heard.append(message)
            if message.startswith("STATUS=stuck"):
                stuck_at = time.monotonic()
            if released and message == "WATCHDOG=1":
                return
    finally:
        daemon.release.set()
        stop.set()


def test_a_minute_stuck_in_its_worker_stops_the_watchdog_until_it_completes(
    notify_socket: tuple[socket.socket, str],
) -> None:
    sock, path = notify_socket
    # 600x: a product minute is a tenth of a real second, so the first tick starts at once.
    clock = ServerClock(
        FakeClock(start=datetime(2026, 11, 30, 2, 0, tzinfo=UTC), anchor=time.time(), speed=600)
    )
    log = EventLog(now=clock.now, stream=io.StringIO())
    activity = Activity(now=clock.now, log=log, file=None, stuck_after=STUCK_AFTER, idle_after=30.0)
    daemon = BlockingDaemon()
    stop = threading.Event()
    heard: list[str] = []
    listener = threading.Thread(target=_listen, args=(sock, daemon, stop, heard))
    listener.start()
    result = run_service(
        daemon=cast(Daemon, daemon),
        clock=clock,
        agent_id="00000000-0000-0000-0000-000000000001",
        log=log,
        environ={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": WATCHDOG_USEC},
        stop=stop,
        activity=activity,
    )
    listener.join()
    assert result == 0
    assert heard[0].startswith("READY=1\n")
    stuck = next(i for i, m in enumerate(heard) if m.startswith("STATUS=stuck"))
    recovered = next(
        i for i, m in enumerate(heard) if i > stuck and m.startswith("STATUS=") and "stuck" not in m
    )
    # Alive before the minute hung; not one ping while it was stuck; pings again once it ended.
    assert "WATCHDOG=1" in heard[:stuck]
    assert "WATCHDOG=1" not in heard[stuck:recovered]
    assert heard[recovered + 1 :].count("WATCHDOG=1") >= 1
    assert "no progress" in heard[stuck]


def _activity(log: EventLog, now: list[float], **bounds: Any) -> Activity:
    return Activity(
        now=lambda: datetime(2026, 11, 30, 1, 58, tzinfo=UTC),
        log=log,
        file=None,
        stuck_after=bounds.get("stuck_after", 10.0),
        idle_after=bounds.get("idle_after", 100.0),
        monotonic=lambda: now[0],
    )


def test_an_idle_daemon_whose_minutes_stop_starting_is_not_alive() -> None:
    now = [0.0]
    activity = _activity(EventLog(now=lambda: datetime.now(UTC), stream=io.StringIO()), now)
    activity.tick_started()
    activity.tick_finished("no_slot", None)
    now[0] = 99.0
    assert activity.alive()
    now[0] = 101.0
    assert not activity.alive()
    assert activity.status_line().startswith("stuck: no minute has started")


def test_progress_is_a_sign_of_life_of_a_long_minute() -> None:
    now = [0.0]
    stream = io.StringIO()
    activity = _activity(EventLog(now=lambda: datetime.now(UTC), stream=stream), now)
    activity.tick_started()
    for second in range(0, 60, 5):
        now[0] = float(second)
        activity.progress("download", second * 1_000_000, 60_000_000)
        assert activity.alive()
    now[0] = 55.0 + 10.5
    assert not activity.alive()


def test_status_says_what_the_daemon_is_doing() -> None:
    now = [0.0]
    stream = io.StringIO()
    log = EventLog(now=lambda: datetime(2026, 11, 30, 1, 58, tzinfo=UTC), stream=stream)
    activity = _activity(log, now)
    activity.tick_started()
    log.emit("control_plane.offline", level="warning", error="GET /v1/agent/config: refused")
    activity.tick_finished("offline", None)
    assert activity.status_line() == (
        "control plane unreachable since 01:58 UTC: GET /v1/agent/config: refused"
    )
    activity.tick_started()
    log.emit("update.dispatching", run_id="r1", version="1.5.0", attempt=1)
    activity.progress("download", 8_800_000, 22_000_000)
    assert activity.status_line() == "downloading 1.5.0 (40 %, 8.4 of 21.0 MB)"
    now[0] = 2.0
    activity.progress("download", 9_000_000, 22_000_000)  # within the throttle: no new line
    now[0] = 6.0
    activity.progress("health", 12, 120)
    assert activity.status_line() == "waiting for 1.5.0 to be healthy (12/120 s)"
    lines = [line for line in stream.getvalue().splitlines() if "update.progress" in line]
    assert len(lines) == 2
    assert all(line.startswith("<6>") for line in lines)


def _config(**fields: Any) -> AgentConfig:
    return parse_config(
        {
            "agent_id": "4b1c9a6e-0000-4000-8000-000000000001",
            "schedule": {"enabled": True, "times": ["03:00"]},
            "timezone": "Europe/Amsterdam",
            "catch_up_minutes": 15,
            "brake": {"engaged": False},
            **fields,
        }
    )


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        pytest.param({}, "waiting for 03:00 CET", id="next_slot_today"),
        pytest.param(
            {"schedule": {"enabled": True, "times": ["02:30"]}},
            "waiting for 02:30 CET on 2026-12-01",
            id="next_slot_tomorrow",
        ),
        pytest.param(
            {"hold": {"until": "2026-12-05T05:00:00Z", "reason": "maintenance", "set_by": "agent"}},
            "held until 2026-12-05 06:00 CET (maintenance)",
            id="held",
        ),
        pytest.param(
            {"brake": {"engaged": True, "reason": "1.5.0 pulled"}},
            "brake engaged (1.5.0 pulled); waiting",
            id="brake",
        ),
        pytest.param(
            {"schedule": {"enabled": False, "times": ["03:00"]}},
            "schedule off; waiting for a manual update",
            id="schedule_off",
        ),
    ],
)
def test_after_a_minute_status_says_what_the_daemon_waits_for(
    fields: dict[str, Any], words: str
) -> None:
    # 02:58 in Amsterdam on 2026-11-30.
    now = datetime(2026, 11, 30, 1, 58, tzinfo=UTC)
    log = EventLog(now=lambda: now, stream=io.StringIO())
    activity = Activity(now=lambda: now, log=log, file=None, stuck_after=10, idle_after=100)
    activity.tick_started()
    activity.tick_finished("no_slot", _config(**fields))
    assert activity.status_line() == words


def test_a_refused_claim_says_it_asks_again_rather_than_waiting_for_tomorrow() -> None:
    now = datetime(2026, 11, 30, 2, 1, tzinfo=UTC)  # 03:01 in Amsterdam, the slot still open
    log = EventLog(now=lambda: now, stream=io.StringIO())
    activity = Activity(now=lambda: now, log=log, file=None, stuck_after=10, idle_after=100)
    activity.tick_started()
    log.emit(
        "claim.refused", level="warning", slot_key="2026-11-30T03:00", code="org_cap", detail="x"
    )
    activity.tick_finished("throttled", _config())
    assert activity.status_line() == (
        "no token for the 03:00 slot yet (org_cap); asking again next minute"
    )


def test_a_rollbacks_health_check_names_the_version_it_waits_for() -> None:
    log = EventLog(now=lambda: datetime(2026, 11, 30, 2, 5, tzinfo=UTC), stream=io.StringIO())
    activity = _activity(log, [0.0])
    activity.tick_started()
    log.emit("update.dispatching", run_id="r1", version="1.3.0", attempt=1)
    activity.progress("health", 12, 120, version="1.2.0")
    assert activity.status_line() == (
        "rolled back from 1.3.0: waiting for 1.2.0 to be healthy (12/120 s)"
    )


@pytest.mark.parametrize(
    ("done", "total", "words"),
    [
        pytest.param(300, 700, "300 of 700 bytes", id="bytes"),
        pytest.param(12 * 1024, 48 * 1024, "12.0 of 48.0 kB", id="kilobytes"),
        pytest.param(8_800_000, 22_000_000, "8.4 of 21.0 MB", id="megabytes"),
    ],
)
def test_a_download_shows_its_size_in_the_unit_it_needs(done: int, total: int, words: str) -> None:
    log = EventLog(now=lambda: datetime(2026, 11, 30, 2, 5, tzinfo=UTC), stream=io.StringIO())
    activity = _activity(log, [0.0])
    log.emit("update.dispatching", run_id="r1", version="1.5.0", attempt=1)
    activity.progress("download", done, total)
    assert activity.status_line().endswith(f" %, {words})")


def test_status_never_goes_back_to_starting_after_ready(
    notify_socket: tuple[socket.socket, str],
) -> None:
    sock, path = notify_socket
    agent_id = "00000000-0000-0000-0000-000000000001"
    second = second_in_minute(agent_id)
    # A second past the agent's second: no minute starts while the test listens.
    start = datetime(2026, 11, 30, 2, 0, tzinfo=UTC) + timedelta(seconds=second + 1)
    clock = ServerClock(FakeClock(start=start, anchor=time.time(), speed=1))
    log = EventLog(now=clock.now, stream=io.StringIO())
    activity = Activity(now=clock.now, log=log, file=None, stuck_after=30.0, idle_after=30.0)
    stop = threading.Event()
    heard: list[str] = []

    def listen() -> None:
        try:
            while heard.count("WATCHDOG=1") < 3:
                heard.append(sock.recv(4096).decode())
        finally:
            stop.set()

    listener = threading.Thread(target=listen)
    listener.start()
    result = run_service(
        daemon=cast(Daemon, BlockingDaemon()),
        clock=clock,
        agent_id=agent_id,
        log=log,
        environ={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": WATCHDOG_USEC},
        stop=stop,
        activity=activity,
    )
    listener.join()
    assert result == 0
    assert (
        heard[0] == f"READY=1\nSTATUS=waiting for the first minute (every minute at :{second:02d})"
    )
    assert [m for m in heard if m.startswith("STATUS=")] == []


def test_a_refused_credential_is_kept_until_a_minute_ends_otherwise() -> None:
    now = datetime(2026, 11, 30, 2, 1, tzinfo=UTC)
    log = EventLog(now=lambda: now, stream=io.StringIO())
    activity = Activity(now=lambda: now, log=log, file=None, stuck_after=10, idle_after=100)
    for _ in range(2):
        activity.tick_started()
        log.emit("control_plane.credential_refused", level="error", error="401 revoked")
        activity.tick_finished("credential_refused", None)
    assert activity.record.credential_refused_since == now
    assert activity.record.credential_refused_error == "401 revoked"
    activity.tick_started()
    activity.tick_finished("error", None)  # a failure on the host says nothing of the credential
    assert activity.record.credential_refused_since == now
    activity.tick_started()
    activity.tick_finished("no_slot", _config())
    assert activity.record.credential_refused_since is None
    assert activity.record.credential_refused_error is None
