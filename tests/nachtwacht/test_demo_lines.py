"""What the demo prints while the night runs and after it: one line per ended platform minute with
its own counts and its own round's tokens, a legend for every count, and every start of an agent
service explained (the supervisor's reasons come from real processes)."""

from __future__ import annotations

import io
import time
from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

from nachtwacht.demo_night.night import night_of
from nachtwacht.demo_night.progress import (
    COLUMNS,
    HEADINGS,
    LEGEND,
    OrgProgress,
    Snapshot,
    _status_as_of,
)
from nachtwacht.demo_night.report import service_start_lines
from nachtwacht.demo_night.terminal import LiveTable, Output
from nachtwacht.demo_world.supervisor import (
    START_AFTER_EXIT,
    START_FIRST,
    START_REQUESTED,
    START_REQUESTED_AFTER_FIRST,
    ServiceSupervisor,
)
from tests.worlds.waiting import wait_until

NIGHT = night_of(date(2026, 12, 1), "Europe/Amsterdam")  # 03:00 CET is 02:00Z
SLOT = NIGHT.slot_at
WAIT_SECONDS = 20.0


def _snapshot(at: datetime, counts: dict[str, int], rounds: list[tuple[datetime, int]]) -> Snapshot:
    org = OrgProgress("Acme Logistics", agents=sum(counts.values()), counts=Counter(counts))
    return Snapshot(at=at, orgs=[org], grants_per_round=rounds, org_grants_per_round={})


def _table() -> tuple[LiveTable, io.StringIO]:
    stream = io.StringIO()
    return LiveTable(Output(stream, time.monotonic()), NIGHT, (5, 25)), stream


def test_a_line_names_the_minute_that_ended_and_that_minutes_own_tokens() -> None:
    table, stream = _table()
    # As of 03:05:00: the line is the 03:04 minute's, and the 03:04 round granted 5 — not 03:03's.
    rounds = [(SLOT + timedelta(minutes=3), 4), (SLOT + timedelta(minutes=4), 5)]
    snapshot = _snapshot(SLOT + timedelta(minutes=5), {"updated": 9, "waiting": 31}, rounds)
    table.minute_ended(snapshot, window_closes=SLOT + timedelta(minutes=15))
    assert stream.getvalue() == (
        "03:04 CET | Acme Logistics: 9 updated, 31 waiting for a token"
        " | tokens granted in this minute's round: 5\n"
    )


def test_once_everyone_is_settled_the_log_says_why_the_night_goes_on() -> None:
    table, stream = _table()
    closes = SLOT + timedelta(minutes=15)
    for minute in (10, 11):
        table.minute_ended(
            _snapshot(SLOT + timedelta(minutes=minute), {"updated": 40}, []), window_closes=closes
        )
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3
    assert lines[1].startswith("  every agent has its outcome; the night goes on to 03:30 CET")
    assert "closes at 03:15 CET" in lines[1] and "reconcile worker" in lines[1]


def test_the_legend_explains_every_heading_the_lines_use() -> None:
    table, stream = _table()
    table.legend()
    legend = stream.getvalue()
    assert legend.splitlines() == list(LEGEND)
    # Every column a line can show is explained, under the heading the line shows it with.
    assert set(HEADINGS) == set(COLUMNS)
    unexplained = [HEADINGS[column] for column in COLUMNS if f"{HEADINGS[column]} — " not in legend]
    assert unexplained == []


def test_a_runs_status_is_read_as_it_stood_at_the_minutes_end() -> None:
    claimed = SLOT + timedelta(seconds=30)
    done = SLOT + timedelta(minutes=1, seconds=20)
    row = {"status": "succeeded", "created_at": claimed, "finished_at": done}
    assert _status_as_of(row, SLOT) is None  # not claimed yet
    assert _status_as_of(row, SLOT + timedelta(minutes=1)) == "claimed"  # updating then
    assert _status_as_of(row, SLOT + timedelta(minutes=2)) == "succeeded"
    assert _status_as_of(row, None) == "succeeded"


def test_every_start_of_an_agent_service_is_explained() -> None:
    setup = Counter({START_FIRST: 49, START_REQUESTED_AFTER_FIRST: 5})
    total = setup + Counter({START_REQUESTED: 49})
    lines = service_start_lines(setup, total, hosts=49)
    assert lines[0] == "agent services: started 103 times for 49 hosts"
    assert lines[1] == (
        "  set-up (installing 1.0.0): 49 first start, "
        "5 restart requested just after its first start"
    )
    assert lines[2] == "  tonight: 49 restart requested"
    assert lines[3].startswith("  (5 restart(s) just after a first start: the supervisor")
    assert not any("defect" in line for line in lines)


def test_a_service_that_exited_on_its_own_is_called_a_defect() -> None:
    total = Counter({START_FIRST: 2, f"{START_AFTER_EXIT} (exit 3)": 1})
    lines = service_start_lines(Counter({START_FIRST: 2}), total, hosts=2)
    assert lines[-1] == "  1 start(s) after a service exited on its own: a defect to look into"


@dataclass
class _Service:
    root: Path

    @property
    def install_root(self) -> Path:
        return self.root

    @property
    def heartbeat(self) -> Path:
        return self.root / "heartbeat.json"

    @property
    def restart_request(self) -> Path:
        return self.root / "restart-request"


def _service(root: Path, script: str) -> _Service:
    program = root / "current" / "bin" / "provibr-agent"
    program.parent.mkdir(parents=True)
    program.write_text(f"#!/bin/sh\n{script}\n")
    program.chmod(0o755)
    return _Service(root)


def _wait_for(supervisor: ServiceSupervisor, reason_prefix: str) -> None:
    wait_until(
        lambda: any(reason.startswith(reason_prefix) for reason in supervisor.starts),
        what=lambda: f"a start {reason_prefix!r}: {supervisor.starts}",
        timeout=WAIT_SECONDS,
        interval=0.02,
    )


def test_the_supervisor_counts_each_start_with_its_reason(tmp_path: Path) -> None:
    steady = _service(tmp_path / "steady", "exec sleep 60")
    crashing = _service(tmp_path / "crashing", "exit 3")
    supervisor = ServiceSupervisor(poll_seconds=0.01)
    supervisor.add(steady)
    supervisor.add(crashing)
    supervisor.start()
    try:
        _wait_for(supervisor, START_FIRST)
        _wait_for(supervisor, f"{START_AFTER_EXIT} (exit 3)")
        # Its first request finds it already running (the set-up race), the second one is an
        # update's restart.
        steady.restart_request.touch()
        _wait_for(supervisor, START_REQUESTED_AFTER_FIRST)
        steady.restart_request.touch()
        wait_until(
            lambda: supervisor.starts[START_REQUESTED],
            what=lambda: f"a start for the update's restart: {supervisor.starts}",
            timeout=WAIT_SECONDS,
            interval=0.02,
        )
    finally:
        supervisor.close()
    assert supervisor.starts[START_FIRST] == 2
    assert supervisor.starts[START_REQUESTED_AFTER_FIRST] == 1
    assert supervisor.starts[START_REQUESTED] == 1
    assert supervisor.restarts == sum(supervisor.starts.values())
