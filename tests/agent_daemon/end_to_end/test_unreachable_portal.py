"""A captive portal in the way for a whole window, end to end: a real daemon reaches a real control
plane (its reconcile worker included, on the embedded PostgreSQL) through a loopback front that,
while the portal is up, answers every request itself — its login page, or a redirect to it — and
forwards nothing.

The control plane was not reached: the agent notes the slot as it notes a cut connection (never
as a config it cannot use), and once the portal is gone the miss reads `unreachable` with the
portal's first error instead of `offline`.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.agent_daemon.daemon_support.night import Night, NightClock, local
from tests.agent_daemon.end_to_end.test_unreachable import SLOT, Gate, miss_event, slot_runs
from tests.agent_daemon.minute.test_broken_network import _read_request

pytestmark = pytest.mark.slow

_PAGE = b"<!DOCTYPE html><html><body><h1>Welcome to Hotel Wi-Fi</h1>Log in</body></html>"
LOGIN_PAGE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_PAGE), _PAGE)
)
REDIRECT = (
    b"HTTP/1.1 302 Found\r\nLocation: http://portal.example/login\r\n"
    b"Content-Length: 0\r\nConnection: close\r\n\r\n"
)


class Portal(Gate):
    """The gate, with a captive portal in it while `answer` is set: every request is answered
    with `answer`, none reaches the control plane."""

    answer: bytes | None = None

    def put_up(self, answer: bytes) -> None:
        self.answer = answer
        # The agent's open connections go through the portal from now on too.
        self.cut()
        self.restore()

    def _serve(self, client: socket.socket) -> None:
        answer = self.answer
        if answer is None:
            super()._serve(client)
            return
        with client, contextlib.suppress(OSError):
            if _read_request(client) is not None:
                client.sendall(answer)


@pytest.fixture
def night(tmp_path: Path, control_plane_server: Callable[..., Any]) -> Iterator[Night]:
    clock = NightClock.held(local("2026-11-30T02:40"), begins=tmp_path / "clock", speed=60.0)
    scenario = Night(root=tmp_path / "night", clock=clock, start_control_plane=control_plane_server)
    yield scenario
    scenario.close()


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (LOGIN_PAGE, "answered 200 OK with an HTML page: it is not a nachtwacht control plane"),
        (REDIRECT, "found 302 Found to http://portal.example/login, which no control plane"),
    ],
    ids=["login_page", "redirect"],
)
def test_a_window_behind_a_captive_portal_reads_unreachable_with_the_portals_answer(
    night: Night, answer: bytes, said: str
) -> None:
    night.publish("1.5.0", 42)
    portal = Portal(urlsplit(night.plane.base_url).port or 0)
    night.agents_url = portal.url
    host = night.add_host("web-01")
    daemon = host.start()
    synced = daemon.wait_for("config.synced")
    portal.put_up(answer)
    assert night.clock.now() < local("2026-11-30T02:59"), f"portal too late: {synced}"
    try:
        tried = daemon.wait_for("slot.unreachable", slot_key=SLOT)
        assert tried["error"].startswith("GET /v1/agent/config: "), tried
        assert said in tried["error"], tried
        assert not daemon.named("config.invalid")
        while not slot_runs(night, host):
            assert night.clock.now() < local("2026-11-30T03:40"), "no pass recorded the slot"
            night.clock.wait_until(night.clock.now() + timedelta(minutes=1))
        assert slot_runs(night, host) == [("missed", "offline", None)]
    finally:
        portal.answer = None
    daemon.wait_for("report.delivered", slot_key=SLOT)

    assert slot_runs(night, host) == [("missed", "unreachable", tried["error"])]
    assert miss_event(night, host) == {
        "slot_key": SLOT,
        "reason": "unreachable",
        "unreachable_error": tried["error"],
    }
