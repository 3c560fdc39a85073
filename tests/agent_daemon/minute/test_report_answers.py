"""What answers the outbox's reports, when it is not the control plane's answer: a redirect, a web
server's or a login page's 4xx page, a body that never ends, a body that drips. None of them is
the control plane refusing the report: each keeps every report queued, in its order, to be sent
again the next minute — never set aside for good, never the daemon's memory or its minute. Over
real HTTP on loopback, with the scripted server's raw answers."""

from __future__ import annotations

import io
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_daemon.connection.control_plane_client import ControlPlaneClient
from agent_daemon.connection.http_client import build_http_client
from agent_daemon.connection.outbox import Outbox
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.host.event_log import EventLog, parse_line
from agent_daemon.minute.reporting import ReportSender
from agent_daemon.updater.update_records import UpdateOutcome
from ground.clock import SystemClock
from ground.contract import CONTRACT_VERSION
from tests.agent_daemon.scripted_server import Script, ScriptedServer, raw, scripted_server

pytestmark = pytest.mark.slow

TIMEOUT_SECONDS = 2.0


def answer(status_line: str, *headers: str, body: bytes = b"") -> Script:
    head = "".join(f"{header}\r\n" for header in headers)
    return raw(
        f"HTTP/1.1 {status_line}\r\n{head}Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n".encode()
        + body
    )


# How much an endless body sends at most (the agent must stop reading long before).
ENDLESS_BYTES = 256 * 1024 * 1024
CHUNK = 64 * 1024


def endless_body(connection: socket.socket, server: ScriptedServer) -> None:
    """200 and a chunked body that does not end (up to `ENDLESS_BYTES`), as fast as the agent
    reads it; what was sent is counted in `server.sent`."""
    connection.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n%s\r\n" % (CHUNK, b"x" * CHUNK)
    sent = 0
    try:
        while not server.stop.is_set() and sent < ENDLESS_BYTES:
            connection.sendall(chunk)
            sent += CHUNK
    finally:
        SENT.append(sent)


SENT: list[int] = []


def dripping_body(connection: socket.socket, server: ScriptedServer) -> None:
    """200 and a chunked body of one byte at a time, each well inside the read timeout."""
    connection.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    while not server.stop.is_set():
        connection.sendall(b"1\r\nx\r\n")
        server.stop.wait(TIMEOUT_SECONDS / 4)


@dataclass
class Agent:
    sender: ReportSender
    outbox: Outbox
    log: io.StringIO

    def events(self) -> list[dict[str, object]]:
        return [parse_line(line) for line in self.log.getvalue().splitlines()]


@pytest.fixture
def agent_for(tmp_path: Path) -> Iterator[object]:
    clients = []

    def make(server: ScriptedServer) -> Agent:
        log = io.StringIO()
        http = build_http_client(
            base_url=server.origin, credential="nwa_test", timeout_seconds=TIMEOUT_SECONDS
        )
        clients.append(http)
        clock = SystemClock()
        sender = ReportSender(
            outbox=Outbox(tmp_path / "outbox"),
            control=ControlPlaneClient(http=http, server_clock=ServerClock(clock)),
            log=EventLog(now=clock.now, stream=log),
            now=clock.now,
        )
        sender.control_plane_contract = CONTRACT_VERSION
        for run in ("run-1", "run-2"):
            sender.queue_outcome(
                slot_key=None,
                outcome=UpdateOutcome(run_id=run, status="succeeded", version="1.5.0", error=None),
            )
        return Agent(sender=sender, outbox=sender._outbox, log=log)

    yield make
    for http in clients:
        http.close()


def flush_within(agent: Agent, seconds: float) -> None:
    """One flush, which must end within `seconds` (a flush that never ends is the failure)."""
    done = threading.Event()

    def flush() -> None:
        agent.sender.flush()
        done.set()

    threading.Thread(target=flush, daemon=True).start()
    assert done.wait(seconds), "the flush did not end"


FOREIGN = [
    pytest.param(answer("302 Found", "Location: https://login.example/"), "302", id="redirect"),
    pytest.param(
        answer("301 Moved Permanently", "Location: https://control.example/v1/agent/runs/run-1"),
        "301",
        id="http_to_https",
    ),
    pytest.param(
        answer(
            "404 Not Found",
            "Content-Type: text/html",
            body=b"<html><body><h1>404 Not Found</h1><hr>nginx</body></html>",
        ),
        "404",
        id="web_servers_404_page",
    ),
    pytest.param(
        answer("400 Bad Request", "Content-Type: text/html", body=b"<html>plain HTTP to HTTPS"),
        "400",
        id="web_servers_400_page",
    ),
    pytest.param(answer("404 Not Found"), "404", id="bare_404"),
    pytest.param(
        answer("407 Proxy Authentication Required", body=b"credentials, please"),
        "407",
        id="proxy_wants_credentials",
    ),
]


@pytest.mark.parametrize(("script", "status"), FOREIGN)
def test_an_answer_not_from_the_control_plane_keeps_every_report_queued(
    agent_for: object, script: Script, status: str
) -> None:
    with scripted_server(script) as server:
        agent = agent_for(server)  # type: ignore[operator]
        flush_within(agent, 10)
    assert [report.run_id for report in agent.outbox.pending()] == ["run-1", "run-2"]
    assert agent.outbox.set_aside(newest=5).count == 0
    assert len(server.requests) == 1  # the first report, then the flush stops: order kept
    events = agent.events()
    assert [event["event"] for event in events] == ["report.waiting"]
    assert status in str(events[0]["error"])
    assert "<" not in str(events[0]["error"])


@pytest.mark.parametrize(
    "script", [pytest.param(endless_body, id="endless"), pytest.param(dripping_body, id="drip")]
)
def test_an_answer_whose_body_never_ends_is_cut_and_the_reports_wait(
    agent_for: object, script: Script
) -> None:
    with scripted_server(script) as server:
        agent = agent_for(server)  # type: ignore[operator]
        flush_within(agent, 6 * TIMEOUT_SECONDS)
    assert [report.run_id for report in agent.outbox.pending()] == ["run-1", "run-2"]
    assert agent.outbox.set_aside(newest=5).count == 0
    events = agent.events()
    assert [event["event"] for event in events] == ["report.waiting"]
    if script is endless_body:
        assert SENT and SENT[-1] < 16 * 1024 * 1024  # the agent stopped reading early


def test_a_contract_refusal_is_still_set_aside_for_good(agent_for: object) -> None:
    """The control plane's own 4xx, in the contract's words: that report is set aside, the next
    one goes out."""
    refusal = answer(
        "404 Not Found",
        "Content-Type: application/json",
        body=b'{"detail": {"code": "run_not_found", "message": "no run run-1"}}',
    )
    with scripted_server(refusal, answer("200 OK", body=b"{}")) as server:
        agent = agent_for(server)  # type: ignore[operator]
        flush_within(agent, 10)
    assert agent.outbox.pending() == []
    held = agent.outbox.set_aside(newest=5)
    assert held.count == 1
    assert held.newest[0].report is not None and held.newest[0].report.run_id == "run-1"
    assert [event["event"] for event in agent.events()] == ["report.delivered", "report.rejected"]
