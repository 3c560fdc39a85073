"""The daemon as systemd runs it: READY and WATCHDOG over $NOTIFY_SOCKET, a loud fake clock,
structured lines on stdout, SIGTERM ends it cleanly; one daemon per state directory."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.worlds.daemons import run_agent
from tests.worlds.hosts import AgentHost

pytestmark = pytest.mark.slow


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(60)
    yield sock, path
    sock.close()


def test_systemd_notify_ready_watchdog_and_a_clean_sigterm(
    control_plane_server: Callable[..., Any],
    tmp_path: Path,
    notify_socket: tuple[socket.socket, str],
) -> None:
    sock, path = notify_socket
    fake_clock = f"2026-11-30T01:00:00Z,anchor={time.time()},speed=60"
    plane = control_plane_server(fake_clock=fake_clock)
    org = plane.create_org("Acme")
    agent = plane.enroll_agent(org["org_id"], "web-01")
    host = AgentHost(tmp_path / "host")
    enrolled = host.enroll(plane.base_url, agent["agent_key"], "--request-timeout-seconds", "300")
    assert enrolled.returncode == 0, enrolled.stderr

    daemon = host.start(
        fake_clock=fake_clock, extra_env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "1000000"}
    )
    try:
        messages = [sock.recv(512).decode()]
        while "WATCHDOG=1" not in messages and len(messages) < 10:
            messages.append(sock.recv(512).decode())
        assert messages[0].startswith("READY=1")
        assert "WATCHDOG=1" in messages
        # What it is doing, once its first minute has run. It may have come before
        # the first ping; the next one comes only when the status changes (at the 03:00 slot).
        while not any(message.startswith("STATUS=") for message in messages):
            messages.append(sock.recv(512).decode())
        first_status = next(m for m in messages if m.startswith("STATUS="))
        assert first_status.startswith("STATUS=waiting for")
        # Once ready, never "starting" again.
        assert "starting" not in messages[0]
        assert "STATUS=starting" not in messages
        ready = daemon.wait_for("daemon.ready")
        assert 0 <= ready["second_in_minute"] < 60
        assert "FAKE CLOCK" in daemon.stderr()
        daemon.wait_for("config.synced")
        status = host.status()
        assert "daemon:        running" in status.stdout
        second = run_agent("run", "--state-dir", str(host.state_dir))
        assert second.returncode == 2
        assert "another agent daemon" in second.stderr
    finally:
        code = daemon.terminate()
    assert code == 0
    assert daemon.event_names()[-2:] == ["daemon.stopping", "daemon.stopped"]
    assert daemon.other_lines == []
    assert all(isinstance(json.dumps(e), str) for e in daemon.events)
    assert "Traceback" not in daemon.stderr()
    assert "daemon:        not running" in host.status().stdout
