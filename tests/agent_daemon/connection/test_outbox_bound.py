"""The outbox of an agent that cannot deliver for a long time: a report is queued at a cost that
does not grow with the queue (before, each one read every report queued), a minute offline reads
one report, and the queue holds at most its bound. At the bound the oldest report that is not an
update's outcome is set aside (an outcome only when nothing else is left), in `rejected/` with
its reason, said in the log and by `agent status`: the disk never fills, nothing is dropped
silently, and the rest keeps its order and its bytes."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_daemon.connection import outbox as outbox_module
from agent_daemon.connection.control_plane_client import ControlPlaneClient, Delivery
from agent_daemon.connection.http_client import build_http_client
from agent_daemon.connection.outbox import (
    DUPLICATE_WINDOW,
    MAX_PENDING_REPORTS,
    SENT_PER_FLUSH,
    Outbox,
    Report,
)
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.disk.daemon_state import DaemonState
from agent_daemon.host.event_log import EventLog, parse_line
from agent_daemon.host.status import AgentStatus, describe_set_aside, render_status
from agent_daemon.minute.reporting import MAX_REPORTS_IN_MEMORY, ReportSender
from agent_daemon.updater.update_records import UpdateOutcome
from ground.clock import SystemClock
from ground.contract import RUNS_PATH
from ground.limits import MAX_TIMES

NOW = datetime(2026, 12, 1, 3, 20, tzinfo=UTC)


def outcome(n: int) -> Report:
    return Report(
        method="PATCH",
        path=f"/v1/agent/runs/run-{n}",
        body={"status": "succeeded", "version": "1.5.0", "error": None},
        run_id=f"run-{n}",
    )


def up_to_date(n: int) -> Report:
    slot = f"{datetime(2026, 1, 1) + timedelta(days=n - 1):%Y-%m-%d}T03:00"
    return Report(
        method="POST",
        path=RUNS_PATH,
        body={"slot_key": slot, "status": "up_to_date", "version": "1.5.0"},
        slot_key=slot,
    )


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every report file the outbox reads (a spy on its one read, which still reads)."""
    seen: list[Path] = []
    real = outbox_module.read_versioned_json

    def counted(path: Path, **kwargs: Any) -> dict[str, Any] | None:
        seen.append(path)
        return real(path, **kwargs)

    monkeypatch.setattr(outbox_module, "read_versioned_json", counted)
    return seen


def test_a_put_reads_no_more_than_the_newest_reports(tmp_path: Path, reads: list[Path]) -> None:
    box = Outbox(tmp_path)
    for n in range(1, 201):
        box.put(outcome(n))
    reads.clear()
    box.put(outcome(201))
    assert len(reads) <= DUPLICATE_WINDOW
    # A step run again queues what it queued just before: still kept once.
    box.put(outcome(201))
    assert [r.run_id for r in box.pending()][-2:] == ["run-200", "run-201"]


def _contents(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*.json"))}


def test_at_the_bound_the_oldest_report_that_is_no_outcome_is_set_aside(tmp_path: Path) -> None:
    box = Outbox(tmp_path, max_pending=4)
    for queued in (up_to_date(1), outcome(2), up_to_date(3), outcome(4)):
        assert box.put(queued) is None
    before = _contents(tmp_path)

    assert box.put(outcome(5)) == up_to_date(1)
    assert [r.slot_key or r.run_id for r in box.pending()] == [
        "run-2", up_to_date(3).slot_key, "run-4", "run-5"
    ]  # fmt: skip
    # The rest as it was, byte for byte; the one set aside in rejected/ with its reason.
    after = _contents(tmp_path)
    assert {name: after[name] for name in before if name in after} == {
        name: data for name, data in before.items() if name in after
    }
    (held,) = box.set_aside(newest=5).newest
    assert held.report == up_to_date(1)
    assert held.why is not None and "outbox_full" in held.why
    words = describe_set_aside(held, None, NOW)
    assert 'the report "already up to date"' in words
    assert "the outbox was full (4 reports waiting)" in words

    assert box.put(outcome(6)) == up_to_date(3)
    # Nothing but outcomes left: the oldest outcome makes room, the newest is kept.
    assert box.put(outcome(7)) == outcome(2)
    assert [r.run_id for r in box.pending()] == ["run-4", "run-5", "run-6", "run-7"]
    assert box.set_aside(newest=5).count == 3


def _unreachable(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


def _sender(
    tmp_path: Path,
    box: Outbox,
    log: io.StringIO,
    answer: Callable[[httpx.Request], httpx.Response] = _unreachable,
) -> ReportSender:
    http = build_http_client(
        base_url="https://control.example",
        credential="nwa_test",
        timeout_seconds=1,
        transport=httpx.MockTransport(answer),
    )
    clock = SystemClock()
    return ReportSender(
        outbox=box,
        control=ControlPlaneClient(http=http, server_clock=ServerClock(clock)),
        log=EventLog(now=clock.now, stream=log),
        now=clock.now,
    )


@pytest.fixture
def log() -> Iterator[io.StringIO]:
    yield io.StringIO()


def test_a_report_set_aside_at_the_bound_is_said_in_the_log(
    tmp_path: Path, log: io.StringIO
) -> None:
    box = Outbox(tmp_path / "outbox", max_pending=2)
    sender = _sender(tmp_path, box, log)
    for slot in ("2026-11-29T03:00", "2026-11-30T03:00", "2026-12-01T03:00"):
        sender.queue_up_to_date(slot_key=slot, installed="1.5.0")
    (line,) = [parse_line(text) for text in log.getvalue().splitlines()]
    assert line["event"] == "outbox.full"
    assert line["level"] == "warning"
    assert line["slot_key"] == "2026-11-29T03:00"
    assert "2 reports" in str(line["detail"])
    assert [r.slot_key for r in box.pending()] == ["2026-11-30T03:00", "2026-12-01T03:00"]


def test_a_minute_offline_reads_one_queued_report(
    tmp_path: Path, log: io.StringIO, reads: list[Path]
) -> None:
    box = Outbox(tmp_path / "outbox")
    sender = _sender(tmp_path, box, log)
    for n in range(1, 101):
        sender.queue_outcome(
            slot_key=None,
            outcome=UpdateOutcome(run_id=f"run-{n}", status="succeeded", version="1.5", error=None),
        )
    reads.clear()
    sender.flush()
    assert len(reads) == 1
    (waiting,) = [parse_line(text) for text in log.getvalue().splitlines()]
    assert waiting["event"] == "report.waiting"
    assert waiting["pending"] == 100


def test_status_says_when_the_outbox_is_at_its_bound() -> None:
    def line(pending: int) -> str:
        text = render_status(
            AgentStatus(
                agent_id="a1",
                control_url="https://control.example",
                daemon_pid=None,
                cached=None,
                state=DaemonState(),
                pending_reports=pending,
                installed_version=None,
                now=NOW,
            )
        )
        (found,) = [text_line for text_line in text.splitlines() if "outbox:" in text_line]
        return found

    assert line(MAX_PENDING_REPORTS - 1).endswith("report(s) waiting to be delivered")
    assert line(MAX_PENDING_REPORTS).endswith(
        "waiting to be delivered (the most it holds: each new one sets the oldest aside in "
        "outbox/rejected/)"
    )


def test_the_bound_is_the_one_the_docs_name() -> None:
    docs = (Path(__file__).parents[3] / "docs" / "agent_daemon.md").read_text(encoding="utf-8")
    assert f"at most {MAX_PENDING_REPORTS:,} reports" in docs


def test_the_bound_holds_a_week_of_the_busiest_schedules_unreachable_reports() -> None:
    """An agent back after a week cut off queues one report per slot it could not reach us in:
    every one the control plane still takes fits, with room for the outcomes behind them."""
    assert MAX_PENDING_REPORTS >= 7 * MAX_TIMES + 500


def test_one_flush_sends_at_most_its_share_and_the_rest_follow_in_order(tmp_path: Path) -> None:
    """A backlog (a week of reports) goes out over several minutes, in order, so that no minute
    spends its window on reports before it claims tonight's slot."""
    box = Outbox(tmp_path)
    total = SENT_PER_FLUSH * 2 + 5
    for n in range(1, total + 1):
        box.put(outcome(n))
    sent: list[str | None] = []

    def deliver(report: Report) -> Delivery:
        sent.append(report.run_id)
        return Delivery(outcome="delivered", status=200)

    first = box.flush(deliver)
    assert len(first.delivered) == SENT_PER_FLUSH
    assert first.more
    box.flush(deliver)
    last = box.flush(deliver)
    assert not last.more
    assert sent == [f"run-{n}" for n in range(1, total + 1)]
    assert box.count() == 0


def test_reports_kept_for_later_without_a_request_do_not_use_the_share(tmp_path: Path) -> None:
    box = Outbox(tmp_path)
    for n in range(1, SENT_PER_FLUSH + 11):
        box.put(up_to_date(n) if n <= SENT_PER_FLUSH else outcome(n))
    # The first SENT_PER_FLUSH wait for a control plane that takes them (no request is made).
    sent: list[str | None] = []

    def deliver(report: Report) -> Delivery:
        if report.run_id is None:
            return Delivery(outcome="later", status=0, detail="not yet")
        sent.append(report.run_id)
        return Delivery(outcome="delivered", status=200)

    result = box.flush(deliver)
    assert len(sent) == 10
    assert not result.more


def test_a_minute_that_leaves_a_backlog_says_how_many_wait(
    tmp_path: Path, log: io.StringIO
) -> None:
    box = Outbox(tmp_path / "outbox")
    for n in range(1, SENT_PER_FLUSH + 4):
        box.put(outcome(n))
    sender = _sender(tmp_path, box, log, lambda request: httpx.Response(200, json={}))
    sender.flush()
    lines = [parse_line(text) for text in log.getvalue().splitlines()]
    assert [line["event"] for line in lines].count("report.delivered") == SENT_PER_FLUSH
    (backlog,) = [line for line in lines if line["event"] == "report.backlog"]
    assert backlog["pending"] == 3


def test_reports_the_outbox_cannot_hold_are_bounded_in_memory_and_each_one_dropped_is_said(
    tmp_path: Path, log: io.StringIO
) -> None:
    """The outbox cannot be written (its path is a file here; a full disk alike) and the control
    plane cannot be reached: the reports kept in memory stop at their bound, the oldest that is
    not an outcome (an outcome only when nothing else is left) making room, each one an error
    line naming what it said — the daemon's memory never grows without end, and nothing goes
    silently."""
    blocked = tmp_path / "outbox"
    blocked.write_text("a file where the outbox's folder should be\n")
    online: list[bool] = []
    sent: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if not online:
            raise httpx.ConnectError("connection refused", request=request)
        sent.append(f"{request.method} {request.url.path} {request.content.decode()}")
        return httpx.Response(200, json={})

    sender = _sender(tmp_path, Outbox(blocked), log, answer)
    extra = 7
    sender.queue_outcome(
        slot_key=None,
        outcome=UpdateOutcome(status="failed", version="1.4.1", error="x", run_id="run-1"),
    )
    for n in range(1, MAX_REPORTS_IN_MEMORY + extra):
        sender.queue_up_to_date(slot_key=up_to_date(n).slot_key or "", installed="1.5.0")
        sender.flush()
    lines = [parse_line(line) for line in log.getvalue().splitlines()]
    dropped = [line for line in lines if line["event"] == "report.dropped"]
    assert [line["slot_key"] for line in dropped] == [
        up_to_date(n).slot_key for n in range(1, extra + 1)
    ]
    assert all(line["level"] == "error" for line in dropped)
    assert all("never sent" in str(line["detail"]) for line in dropped)
    assert blocked.read_text() == "a file where the outbox's folder should be\n"

    online.append(True)
    sender.flush()
    assert len(sent) == MAX_REPORTS_IN_MEMORY
    # The outcome kept, first; the newest "already up to date" reports after it, in order.
    assert sent[0].startswith("PATCH /v1/agent/runs/run-1 ")
    assert [s.split('"slot_key":"')[1][:16] for s in sent[1:]] == [
        up_to_date(n).slot_key for n in range(extra + 1, MAX_REPORTS_IN_MEMORY + extra)
    ]


def test_only_outcomes_in_memory_make_room_with_the_oldest_outcome(
    tmp_path: Path, log: io.StringIO
) -> None:
    blocked = tmp_path / "outbox"
    blocked.write_text("")
    sender = _sender(tmp_path, Outbox(blocked), log)
    for n in range(1, MAX_REPORTS_IN_MEMORY + 2):
        sender.queue_outcome(
            slot_key=None,
            outcome=UpdateOutcome(status="succeeded", version="1.5.0", error=None, run_id=f"r{n}"),
        )
    lines = [parse_line(line) for line in log.getvalue().splitlines()]
    assert [line["run_id"] for line in lines if line["event"] == "report.dropped"] == ["r1"]
