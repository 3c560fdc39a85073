"""`control serve --workers N` is one supervisor and N forked workers on one listening socket.
However the supervisor ends — stopped with SIGTERM, or killed with SIGKILL, which it cannot
catch — its workers end with it: none is left serving the port (answering with a process no one
supervises, and making the next `serve` fail with "Address already in use")."""

from __future__ import annotations

import errno
import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import RunningControlPlane

pytestmark = pytest.mark.slow

WORKERS = 3
# A deadline for processes that should end at once, not a speed expectation.
GONE_DEADLINE_SECONDS = 60.0


def _parent_and_state(pid: int) -> tuple[int, str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # `pid (comm) state ppid …`: comm may hold spaces and parentheses, so split after the last ")".
    state, ppid = stat.rsplit(")", 1)[1].split()[:2]
    return int(ppid), state


def _children(parent: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _parent_and_state(int(entry))
            if stat is not None and stat[0] == parent and stat[1] != "Z":
                found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    """Running (a zombie has ended: it only waits for whoever adopted it to reap it)."""
    stat = _parent_and_state(pid)
    return stat is not None and stat[1] != "Z"


def _wait_until_gone(pids: list[int]) -> list[int]:
    deadline = time.monotonic() + GONE_DEADLINE_SECONDS
    while (left := [pid for pid in pids if _alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _port(server: RunningControlPlane) -> int:
    port = urlsplit(server.base_url).port
    assert port is not None
    return port


def _assert_port_free(port: int) -> None:
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) == errno.ECONNREFUSED
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))  # what the next `serve` on this port does


def _serving(
    control_plane_server: Callable[..., RunningControlPlane],
) -> tuple[RunningControlPlane, list[int]]:
    server = control_plane_server(args=["--workers", str(WORKERS)])
    workers = _children(server.pid)
    assert len(workers) == WORKERS
    assert httpx.get(f"{server.base_url}/healthz", timeout=30).status_code == 200
    return server, workers


def test_killing_the_supervisor_ends_every_worker_and_frees_the_port(
    control_plane_server: Callable[..., RunningControlPlane],
) -> None:
    server, workers = _serving(control_plane_server)
    os.kill(server.pid, signal.SIGKILL)
    server.process.wait()
    left = _wait_until_gone(workers)
    for pid in left:  # not to leave them serving after the test, whatever it found
        os.kill(pid, signal.SIGKILL)
    assert left == []
    _assert_port_free(_port(server))


def test_sigterm_stops_the_supervisor_and_every_worker_cleanly(
    control_plane_server: Callable[..., RunningControlPlane],
) -> None:
    server, workers = _serving(control_plane_server)
    assert server.stop() == 0
    assert _wait_until_gone(workers) == []
    assert "nachtwacht control plane stopped" in server.stderr()
    assert "worker" not in server.stderr()  # no worker reported a failure on its way out
    _assert_port_free(_port(server))


def test_a_killed_worker_stops_the_others_and_says_which_and_how(
    control_plane_server: Callable[..., RunningControlPlane],
) -> None:
    server, workers = _serving(control_plane_server)
    os.kill(workers[0], signal.SIGKILL)
    assert server.process.wait(timeout=GONE_DEADLINE_SECONDS) == 1
    assert _wait_until_gone(workers) == []
    # The operator reads why the replica ended: which worker, and a signal's name, not a
    # wait status in hex.
    assert (
        f"nachtwacht control serve: a worker (pid {workers[0]}) was killed by SIGKILL; "
        "stopping the others"
    ) in server.stderr()
    _assert_port_free(_port(server))
