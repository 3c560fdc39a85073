"""The way in cut for a whole window, end to end: a real daemon reaches a real control plane
(its reconcile worker included, on the embedded PostgreSQL) through a loopback front whose
listener the test closes, as a broken load balancer, DNS, firewall or proxy would leave it.

The agent keeps trying through its slot's window and cannot connect; the missed pass records the
slot `offline` (nobody was seen); the way comes back, the agent says which slot it tried, and the
run reads `unreachable` with its error. A host whose daemon never runs stays `offline`.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

import psycopg
import pytest

from tests.agent_daemon.daemon_support.night import Night, NightClock, local

pytestmark = pytest.mark.slow

SLOT = "2026-11-30T03:00"


class Gate:
    """A plain TCP front on one loopback port: `cut` closes its listener and every connection
    through it (the agent's kept-alive ones too), `restore` listens on the same port again."""

    def __init__(self, target_port: int) -> None:
        self._target = target_port
        probe = socket.create_server(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.restore()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def restore(self) -> None:
        listener = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        assert self._listener is not None
        # Shut down first: a close alone leaves the socket listening while `accept` blocks on it.
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._listener = None
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._open.clear()

    def _accept(self, listener: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = listener.accept()
                threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self._target))
        except OSError:
            client.close()
            return
        with self._lock:
            self._open |= {client, upstream}
        back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
        back.start()
        _pipe(client, upstream)
        back.join(timeout=30)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


@pytest.fixture
def night(tmp_path: Path, control_plane_server: Callable[..., Any]) -> Iterator[Night]:
    clock = NightClock.held(local("2026-11-30T02:40"), begins=tmp_path / "clock", speed=60.0)
    scenario = Night(root=tmp_path / "night", clock=clock, start_control_plane=control_plane_server)
    yield scenario
    scenario.close()


def slot_runs(night: Night, host: Any) -> list[tuple[str, str | None, str | None]]:
    return [
        (run["status"], run["miss_reason"], run["error"])
        for run in night.runs(host)
        if run["slot_key"] == SLOT
    ]


def miss_event(night: Night, host: Any) -> dict[str, Any]:
    with psycopg.connect(night.plane.database_url) as conn:
        row = conn.execute(
            "SELECT data FROM events WHERE agent_id = %s AND kind = 'update.missed'",
            [UUID(host.agent_id)],
        ).fetchone()
    assert row is not None
    data: dict[str, Any] = row[0]
    return data


def test_a_window_with_the_way_in_cut_reads_unreachable_once_the_agent_is_back(
    night: Night,
) -> None:
    night.publish("1.5.0", 42)
    gate = Gate(urlsplit(night.plane.base_url).port or 0)
    night.agents_url = gate.url
    cut_off = night.add_host("web-01")
    night.agents_url = None
    switched_off = night.add_host("web-02")
    daemon = cut_off.start()
    synced = daemon.wait_for("config.synced")
    gate.cut()
    assert night.clock.now() < local("2026-11-30T02:59"), f"cut too late: {synced}"
    try:
        tried = daemon.wait_for("slot.unreachable", slot_key=SLOT)
        assert "connect" in tried["error"]
        # The worker's pass after the window (03:15 and its settle margin) finds nobody.
        while not (slot_runs(night, cut_off) and slot_runs(night, switched_off)):
            assert night.clock.now() < local("2026-11-30T03:40"), "no pass recorded the slot"
            night.clock.wait_until(night.clock.now() + timedelta(minutes=1))
        assert slot_runs(night, cut_off) == [("missed", "offline", None)]
    finally:
        gate.restore()
    daemon.wait_for("report.delivered", slot_key=SLOT)

    [(status, reason, error)] = slot_runs(night, cut_off)
    assert (status, reason) == ("missed", "unreachable")
    assert error is not None and "connect" in error
    assert miss_event(night, cut_off) == {
        "slot_key": SLOT,
        "reason": "unreachable",
        "unreachable_error": error,
    }
    assert slot_runs(night, switched_off) == [("missed", "offline", None)]
