"""The daemon's minutes against a broken network, over real HTTP on loopback: a tiny server of the
test's own answers as the in-memory control plane does while the network is sane, and as a broken
one does in between — a connection reset in the middle of the config's body, a Content-Length
that lies either way, a captive portal's page where JSON is expected, a redirect to another host,
a head that never ends, a body dripped a byte a second past the agent's timeouts.

Each time: the minute ends within its bound, one line in the log says what happened, `agent
status` (the real command, on the same state directory) says it too, nothing is consumed or lost
(the report waiting in the outbox is still there, the cached config unchanged), and the next
minute, the network sane again, syncs and delivers the report."""

from __future__ import annotations

import io
import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from http import HTTPStatus
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_daemon.commands.agent_parts import http_client_for
from agent_daemon.connection.config_cache import ConfigCache
from agent_daemon.connection.control_plane_client import ANSWER_TIMEOUTS, ControlPlaneClient
from agent_daemon.connection.outbox import Outbox, Report
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.disk.daemon_state import StateStore
from agent_daemon.host.activity import Activity, ActivityFile
from agent_daemon.host.event_log import EventLog, parse_line
from agent_daemon.minute.daemon import Daemon
from agent_daemon.settings import AgentPaths, load_settings
from ground.contract import RUNS_PATH, NothingToDoReport
from tests.agent_daemon.commands.test_network_cli import write_enrolled_config
from tests.agent_daemon.daemon_support.fake_control_plane import (
    CREDENTIAL,
    FakeControlPlane,
    Run,
)
from tests.agent_daemon.daemon_support.stub_updater import StubUpdater
from tests.worlds.clocks import ManualClock
from tests.worlds.daemons import run_agent
from tests.worlds.hosts import AgentHost

pytestmark = pytest.mark.slow

# 02:50 in Amsterdam: before the 03:00 slot, so a minute has only the poll and the reports to do.
NOW = datetime(2026, 11, 30, 1, 50, tzinfo=UTC)
TIMEOUT_SECONDS = 1.0
# The report that waits in the outbox through the broken minutes: a slot's "already up to date".
WAITING = NothingToDoReport(slot_key="2026-11-29T03:00", status="up_to_date", version="1.5.0")

Answer = Callable[[socket.socket, threading.Event], None]


def _read_request(connection: socket.socket) -> tuple[bytes, bytes] | None:
    """The next request's head and body (by its Content-Length), or None when the client left."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = connection.recv(65536)
        if not chunk:
            return None
        body += chunk
    return head, body


class BrokenNetwork:
    """A loopback server: the fake control plane's answers while `broken` is None, else
    `broken`'s raw bytes for every request."""

    def __init__(self, plane: FakeControlPlane) -> None:
        self.plane = plane
        self.broken: Answer | None = None
        self.stop = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.origin = f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def serve(self) -> None:
        while not self.stop.is_set():
            try:
                connection, _ = self.listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._connection, args=(connection,), daemon=True).start()

    def _connection(self, connection: socket.socket) -> None:
        with connection, suppress(OSError):
            while not self.stop.is_set():
                request = _read_request(connection)
                if request is None:
                    return
                broken = self.broken
                if broken is not None:
                    broken(connection, self.stop)
                    return
                connection.sendall(self._sane(*request))

    def _sane(self, head: bytes, body: bytes) -> bytes:
        request_line, *lines = head.decode("latin-1").split("\r\n")
        method, target, _ = request_line.split(" ")
        headers = [tuple(part.strip() for part in line.split(":", 1)) for line in lines]
        answer = self.plane.handle(
            httpx.Request(method, "http://control.test" + target, headers=headers, content=body)
        )
        answer.read()
        status = HTTPStatus(answer.status_code)
        out = f"HTTP/1.1 {status.value} {status.phrase}\r\n"
        for name, value in answer.headers.items():
            if name.lower() not in {"content-length", "transfer-encoding", "connection"}:
                out += f"{name}: {value}\r\n"
        out += f"Content-Length: {len(answer.content)}\r\n\r\n"
        return out.encode("latin-1") + answer.content


@contextmanager
def broken_network(plane: FakeControlPlane) -> Iterator[BrokenNetwork]:
    network = BrokenNetwork(plane)
    thread = threading.Thread(target=network.serve, daemon=True)
    thread.start()
    try:
        yield network
    finally:
        network.stop.set()
        thread.join(timeout=5)
        network.listener.close()


# -- the broken answers ---------------------------------------------------------------------------

_JSON_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
_CONFIG_START = b'{"agent_id": "4b1c9a6e-0000-4000-8000-000000000001", "name": "web-01", '


def reset_mid_body(connection: socket.socket, stop: threading.Event) -> None:
    connection.sendall(_JSON_HEAD + b"Content-Length: 4000\r\n\r\n" + _CONFIG_START)
    # SO_LINGER of 0: the close is a reset (RST), not an orderly end.
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def length_longer(connection: socket.socket, stop: threading.Event) -> None:
    connection.sendall(_JSON_HEAD + b"Content-Length: 4000\r\n\r\n" + _CONFIG_START)


def length_shorter(connection: socket.socket, stop: threading.Event) -> None:
    # The length ends the body inside its JSON; the rest is left on a connection kept open.
    body = _CONFIG_START + b'"timezone": "Europe/Amsterdam"}'
    connection.sendall(_JSON_HEAD + b"Content-Length: 20\r\n\r\n" + body)
    stop.wait(3)


def captive_portal(connection: socket.socket, stop: threading.Event) -> None:
    page = b"<!DOCTYPE html><html><body><h1>Welcome to Hotel Wi-Fi</h1>Log in</body></html>"
    connection.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(page), page)
    )


def redirect_elsewhere(connection: socket.socket, stop: threading.Event) -> None:
    connection.sendall(
        b"HTTP/1.1 302 Found\r\nLocation: http://portal.example/login?next=/v1/agent/config\r\n"
        b"Content-Length: 0\r\nConnection: close\r\n\r\n"
    )


def head_never_ends(connection: socket.socket, stop: threading.Event) -> None:
    connection.sendall(b"HTTP/1.1 200 OK\r\n")
    while not stop.is_set():
        connection.sendall(b"X-Filler: " + b"a" * 1000 + b"\r\n")


def body_drips(connection: socket.socket, stop: threading.Event) -> None:
    connection.sendall(_JSON_HEAD + b"Content-Length: 4000\r\n\r\n")
    for byte in _CONFIG_START:
        # Each byte well within the read timeout (a gap of a whole timeout was one now and then
        # on a loaded machine): the answer's total deadline is what cuts it.
        if stop.wait(TIMEOUT_SECONDS / 4):
            return
        connection.sendall(bytes([byte]))


# -- the agent ------------------------------------------------------------------------------------


class Agent:
    """The daemon as `agent run` builds it, on real files, with its activity file."""

    def __init__(self, host: AgentHost, origin: str, plane: FakeControlPlane) -> None:
        config = write_enrolled_config(
            host,
            control_url=origin,
            credential=CREDENTIAL,
            request_timeout_seconds=TIMEOUT_SECONDS,
        )
        self.paths = AgentPaths(state_dir=host.state_dir, config_file=config)
        settings = load_settings(self.paths)
        self.clock = ManualClock(NOW)
        plane.now = self.clock.now
        server_clock = ServerClock(self.clock, elapsed=lambda: self.clock.now().timestamp())
        self.stream = io.StringIO()
        self.log = EventLog(now=server_clock.now, stream=self.stream)
        self.activity = Activity(
            now=server_clock.now,
            log=self.log,
            file=ActivityFile(host.state_dir),
            stuck_after=60,
            idle_after=600,
        )
        self.http = http_client_for(settings, server_clock)
        self.outbox = Outbox(host.state_dir / "outbox")
        self.cache = ConfigCache(host.state_dir / "config-cache.json")
        self.state_dir = host.state_dir
        self.daemon = Daemon(
            control=ControlPlaneClient(http=self.http, server_clock=server_clock),
            updater=StubUpdater(installed="1.5.0"),
            state_store=StateStore(host.state_dir / "daemon-state.json"),
            config_cache=self.cache,
            outbox=self.outbox,
            server_clock=server_clock,
            log=self.log,
        )
        self.daemon.start()

    def minute(self) -> tuple[str, float]:
        """One minute as the service runs it: its result and how long it took."""
        began = time.monotonic()
        self.activity.tick_started()
        result = "error"
        try:
            result = self.daemon.tick()
        finally:
            loaded = self.cache.load()
            self.activity.tick_finished(result, None if loaded is None else loaded.config)
        return result, time.monotonic() - began

    def files(self) -> dict[str, bytes]:
        """The state directory's files but the activity file (which is to say what happened)."""
        return {
            str(path.relative_to(self.state_dir)): path.read_bytes()
            for path in sorted(self.state_dir.rglob("*"))
            if path.is_file() and path.name != "activity.json"
        }

    def events(self) -> list[dict[str, Any]]:
        return [parse_line(line) for line in self.stream.getvalue().splitlines()]

    def status(self) -> dict[str, Any]:
        shown = run_agent("status", "--json", "--state-dir", str(self.paths.state_dir))
        assert shown.returncode == 0, shown.stderr
        found: dict[str, Any] = json.loads(shown.stdout)
        return found


# Each broken answer, the minute's result and words its line must hold.
BROKEN = [
    pytest.param(reset_mid_body, "offline", "the connection broke off before the whole answer "
                 "came", id="reset_mid_body"),
    pytest.param(length_longer, "offline", "the connection broke off before the whole answer "
                 "came (peer closed connection without sending complete message body (received "
                 "71 bytes, expected 4000))", id="content_length_longer"),
    pytest.param(length_shorter, "bad_config", "the answer is not JSON",
                 id="content_length_shorter"),
    # Not the control plane's answer: it was not reached (as a cut connection), never a bad config.
    pytest.param(captive_portal, "offline", "answered 200 OK with an HTML page: it is not a "
                 "nachtwacht control plane", id="captive_portal"),
    pytest.param(redirect_elsewhere, "offline", "302 Found to "
                 "http://portal.example/login?next=/v1/agent/config, which no control plane "
                 "answers", id="redirect_elsewhere"),
    pytest.param(head_never_ends, "offline", "before the whole answer came",
                 id="head_never_ends"),
    # The head came whole, then the body a byte a second: the words say how far it came.
    pytest.param(body_drips, "offline", "no whole answer in time (connect, head and body within "
                 "3 s; 200 and ", id="body_drips_past_the_timeouts"),
]  # fmt: skip


@pytest.mark.parametrize(("broken", "result", "words"), BROKEN)
def test_a_broken_network_costs_a_line_and_nothing_else_and_the_next_minute_works(
    tmp_path: Path, broken: Answer, result: str, words: str
) -> None:
    plane = FakeControlPlane(now=lambda: NOW, release_version="1.5.0")
    # The waiting report's run is on record already: the control plane answers it 200.
    plane.runs["run-0"] = Run(
        run_id="run-0", trigger="schedule", slot_key=WAITING.slot_key, status="up_to_date"
    )
    runs = dict(plane.runs)
    with broken_network(plane) as network:
        agent = Agent(AgentHost(tmp_path / "host"), network.origin, plane)
        try:
            # A sane minute first: the config cached; then a report waits in the outbox.
            assert agent.minute()[0] == "no_slot"
            agent.outbox.put(
                Report(method="POST", path=RUNS_PATH, body=WAITING.model_dump(mode="json"))
            )
            waiting = [report.body for report in agent.outbox.pending()]
            files = agent.files()
            seen = len(agent.events())

            network.broken = broken
            found, took = agent.minute()
            assert found == result
            assert took < (ANSWER_TIMEOUTS + 1) * TIMEOUT_SECONDS
            [line] = [e for e in agent.events()[seen:] if e["level"] in {"warning", "error"}]
            error = str(line["error"])
            assert error.startswith("GET /v1/agent/config: "), line
            assert words in error, line
            assert "Traceback" not in error
            # `agent status` says it, in the same words.
            shown = agent.status()
            assert any(error in problem for problem in shown["problems"]), shown["problems"]
            assert error in shown["activity"]["doing"]
            # Nothing consumed, nothing lost.
            assert [report.body for report in agent.outbox.pending()] == waiting
            assert agent.files() == files
            assert plane.runs == runs
            assert f"POST {RUNS_PATH}" not in plane.requests

            # The network sane again: the next minute syncs and delivers the report.
            network.broken = None
            assert agent.minute()[0] == "no_slot"
            assert agent.outbox.pending() == []
            assert agent.outbox.set_aside(newest=1).count == 0
            assert plane.requests.count(f"POST {RUNS_PATH}") == 1
            shown = agent.status()
            assert not any(error in problem for problem in shown["problems"]), shown["problems"]
            assert error not in shown["activity"]["doing"]
        finally:
            agent.http.close()
