"""An unreachable slot's report is not lost to a replica of the previous release (a rolling
upgrade behind a load balancer): its 404 for the route keeps the report queued while the run
reports behind it go out in their order, and the agent gives up only once the control plane would
refuse the slot anyway. Over real HTTP on loopback; the real previous release is in
tests/rolling/test_reports_to_an_older_replica.py."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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
from ground.contract import CONTRACT_VERSION, RUNS_PATH, UNREACHABLE_PATH, UnreachableReport
from ground.limits import MAX_UNREACHABLE_REPORT_AGE_DAYS

SLOT = "2026-11-30T03:00"
FIRST_TRY = datetime(2026, 11, 30, 2, 0, 30, tzinfo=UTC)


@dataclass
class Replica:
    """What answers behind the load balancer: `upgraded` or not (the previous release, without
    the route), and what it was asked, in order."""

    upgraded: bool = False
    # Answer the route with the contract's own 404 (an agent it does not know).
    unknown_agent: bool = False
    asked: list[str] = field(default_factory=list)


def _handler(replica: Replica) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            replica.asked.append(f"{self.command} {self.path} {body.get('status', '')}".strip())
            if self.path == UNREACHABLE_PATH and replica.unknown_agent:
                status, document = (
                    404,
                    {"detail": {"code": "agent_not_found", "message": "agent x does not exist"}},
                )
            elif self.path == UNREACHABLE_PATH and not replica.upgraded:
                # FastAPI's answer for a path it has no route for: no contract code.
                status, document = 404, {"detail": "Not Found"}
            elif self.path == UNREACHABLE_PATH:
                status, document = (
                    200,
                    {
                        "slot_key": body["slot_key"],
                        "result": "recorded",
                        "message": "kept",
                    },
                )
            else:
                status, document = 200, {}
            encoded = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(encoded)))
            self.end_headers()
            self.wfile.write(encoded)

        do_POST = _answer
        do_PATCH = _answer

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def replica() -> Iterator[tuple[Replica, str]]:
    state = Replica()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Agent:
    sender: ReportSender
    outbox: Outbox
    log: io.StringIO
    now: list[datetime]


@pytest.fixture
def agent(tmp_path: Path, replica: tuple[Replica, str]) -> Iterator[Agent]:
    _, url = replica
    log = io.StringIO()
    now = [FIRST_TRY + timedelta(minutes=5)]
    outbox = Outbox(tmp_path / "outbox")
    with build_http_client(base_url=url, credential="nwa_test", timeout_seconds=10) as http:
        sender = ReportSender(
            outbox=outbox,
            control=ControlPlaneClient(http=http, server_clock=ServerClock(SystemClock())),
            log=EventLog(now=lambda: now[0], stream=log),
            now=lambda: now[0],
        )
        # An upgraded replica answered this minute's config poll.
        sender.control_plane_contract = CONTRACT_VERSION
        yield Agent(sender=sender, outbox=outbox, log=log, now=now)


def _queue(agent: Agent) -> None:
    agent.sender.queue_outcome(slot_key="2026-11-29T03:00", outcome=_outcome("run-1"))
    agent.sender.queue_unreachable(
        UnreachableReport(
            slot_key=SLOT,
            error="GET /v1/agent/config: cannot connect ([Errno 111] Connection refused)",
            first_tried_at=FIRST_TRY,
            last_tried_at=FIRST_TRY + timedelta(minutes=3),
            attempts=4,
        )
    )
    agent.sender.queue_outcome(slot_key=SLOT, outcome=_outcome("run-2"))
    agent.sender.queue_up_to_date(slot_key="2026-12-01T03:00", installed="1.4.1")


def _outcome(run_id: str) -> UpdateOutcome:
    return UpdateOutcome(status="succeeded", version="1.5.0", error=None, run_id=run_id)


def _rejected(outbox: Outbox) -> list[Path]:
    return sorted(outbox.rejected_directory.glob("*.json"))


def test_a_replica_without_the_route_keeps_the_report_and_the_rest_go_out_in_order(
    agent: Agent, replica: tuple[Replica, str]
) -> None:
    state, _ = replica
    _queue(agent)
    agent.sender.flush()
    assert state.asked == [
        "PATCH /v1/agent/runs/run-1 succeeded",
        f"POST {UNREACHABLE_PATH}",
        "PATCH /v1/agent/runs/run-2 succeeded",
        f"POST {RUNS_PATH} up_to_date",
    ]
    assert [r.path for r in agent.outbox.pending()] == [UNREACHABLE_PATH]
    assert _rejected(agent.outbox) == []
    assert "report.waiting_for_route" in agent.log.getvalue()
    assert "report.rejected" not in agent.log.getvalue()

    # The next minute reaches a replica of the previous release again: still kept, said once.
    agent.sender.flush()
    assert [r.path for r in agent.outbox.pending()] == [UNREACHABLE_PATH]
    assert agent.log.getvalue().count("report.waiting_for_route") == 1

    # Then an upgraded one: the report arrives.
    state.upgraded = True
    agent.sender.flush()
    assert state.asked[-1] == f"POST {UNREACHABLE_PATH}"
    assert agent.outbox.pending() == []
    assert _rejected(agent.outbox) == []


def test_a_control_plane_that_does_not_say_it_takes_the_report_is_not_sent_it(
    agent: Agent, replica: tuple[Replica, str]
) -> None:
    state, _ = replica
    _queue(agent)
    agent.sender.control_plane_contract = 6
    agent.sender.flush()
    assert f"POST {UNREACHABLE_PATH}" not in state.asked
    assert len(state.asked) == 3
    assert [r.path for r in agent.outbox.pending()] == [UNREACHABLE_PATH]
    assert _rejected(agent.outbox) == []


def test_the_contracts_own_404_is_a_refusal_and_sets_the_report_aside(
    agent: Agent, replica: tuple[Replica, str]
) -> None:
    state, _ = replica
    state.unknown_agent = True
    _queue(agent)
    agent.sender.flush()
    assert agent.outbox.pending() == []
    [set_aside] = _rejected(agent.outbox)
    assert "does not exist" in set_aside.with_suffix(".reason").read_text()
    assert "report.rejected" in agent.log.getvalue()


def test_the_report_is_given_up_only_once_the_control_plane_would_refuse_it(
    agent: Agent, replica: tuple[Replica, str]
) -> None:
    state, _ = replica
    _queue(agent)
    bound = FIRST_TRY + timedelta(days=MAX_UNREACHABLE_REPORT_AGE_DAYS)
    # A day before the bound, and at the bound itself: the control plane would still take it.
    for now in (bound - timedelta(days=1), bound):
        agent.now[0] = now
        agent.sender.flush()
        assert [r.path for r in agent.outbox.pending()] == [UNREACHABLE_PATH]
        assert _rejected(agent.outbox) == []
    asked = len(state.asked)

    # Well past it (the slot is older than the bound): set aside with words for the host's admin.
    agent.now[0] = bound + timedelta(hours=2)
    agent.sender.flush()
    assert len(state.asked) == asked, "nothing is sent for a slot the control plane refuses"
    assert agent.outbox.pending() == []
    [set_aside] = _rejected(agent.outbox)
    reason = json.loads(set_aside.with_suffix(".reason").read_text())["given_up"]
    assert SLOT in reason
    assert f"older than {MAX_UNREACHABLE_REPORT_AGE_DAYS} days" in reason
    assert "offline" in reason
    logged = [parse_line(line) for line in agent.log.getvalue().splitlines()]
    [given_up] = [line for line in logged if line.get("event") == "report.given_up"]
    assert given_up["level"] == "warning"
    assert given_up["slot_key"] == SLOT
