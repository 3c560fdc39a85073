"""This release's agent reporting to a replica of the previous release during a rolling upgrade:
the agent heard this contract from an upgraded replica, and its report reaches one that is not
upgraded yet — a run whose switch was refused for a closed window (it knows no `window_closed`),
a slot's window the agent could not reach the control plane in (it has no route for that). The
previous release's control plane, from this repository's history, serves the schema this checkout
migrated (expand-only)."""

from __future__ import annotations

import io
import time
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from agent_daemon.connection.control_plane_client import ControlPlaneClient
from agent_daemon.connection.http_client import build_http_client
from agent_daemon.connection.outbox import Outbox
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.host.event_log import EventLog
from agent_daemon.minute.reporting import ReportSender
from agent_daemon.updater.update_records import UpdateOutcome
from control_plane import migrate
from ground.clock import SystemClock
from ground.contract import (
    CLAIMS_PATH,
    CONTRACT_VERSION,
    UNREACHABLE_PATH,
    OutcomeReason,
    UnreachableReport,
)
from nachtwacht.demo_world.children import Subprocesses
from nachtwacht.demo_world.control_planes import start_control_plane
from signed_release.keys import generate_key_files
from tests.rolling.previous_build import published_by_previous

SLOT = "2026-11-30T03:00"


@pytest.mark.slow
def test_a_closed_window_reported_to_a_replica_not_yet_upgraded_arrives_as_interrupted(
    tmp_path: Path, empty_database_url: str, previous_release: Subprocesses
) -> None:
    url = empty_database_url
    # The previous release serves its own schema; this checkout's migrations run while it does.
    migrated = previous_release.run("control", "migrate", "--database-url", url)
    assert migrated.returncode == 0, migrated.stderr
    _, public_key, _ = generate_key_files(tmp_path / "keys")
    # Product time almost frozen at 03:01 CET, inside the slot's window.
    fake_clock = f"2026-11-30T02:01:00Z,anchor={time.time()!r},speed=0.001"
    previous = start_control_plane(
        stderr_path=tmp_path / "previous.stderr",
        database_url=url,
        fake_clock=fake_clock,
        env={"NACHTWACHT_RELEASE_PUBLIC_KEYS": str(public_key)},
        args=["--no-migrate"],
        launcher=previous_release,
    )
    try:
        org = previous.create_org("Acme")
        agent_key = previous.enroll_agent(org["org_id"], "web-01")["agent_key"]
        published_by_previous(
            previous, tmp_path, clock_setting=fake_clock, previous_release=previous_release
        )
        migrate.upgrade(url)
        log_lines = io.StringIO()
        with build_http_client(
            base_url=previous.base_url, credential=agent_key, timeout_seconds=60
        ) as http:
            granted = http.post(CLAIMS_PATH, json={"slot_key": SLOT, "from_version": "1.4.1"})
            assert granted.status_code == 201, granted.text
            run_id = granted.json()["run_id"]
            server_clock = ServerClock(SystemClock())
            sender = ReportSender(
                outbox=Outbox(tmp_path / "outbox"),
                control=ControlPlaneClient(http=http, server_clock=server_clock),
                log=EventLog(now=lambda: datetime.now(UTC), stream=log_lines),
                now=server_clock.now,
            )
            # An upgraded replica answered this minute's config poll.
            sender.control_plane_contract = CONTRACT_VERSION
            sender.queue_outcome(
                slot_key=SLOT,
                outcome=UpdateOutcome(
                    status="failed",
                    version="1.4.1",
                    error="the control plane refused the switch: window_closed",
                    reason=OutcomeReason.WINDOW_CLOSED,
                    run_id=run_id,
                ),
            )
            sender.flush()
        assert "report.rejected" not in log_lines.getvalue(), log_lines.getvalue()
        assert "report.delivered" in log_lines.getvalue()
        assert not (tmp_path / "outbox" / "rejected").exists()
        with psycopg.connect(url) as conn:
            row = conn.execute(
                "SELECT status, outcome_reason FROM runs WHERE id = %s", [run_id]
            ).fetchone()
        assert row == ("failed", "interrupted")
        assert "Traceback" not in previous.stderr()
    finally:
        previous.stop()


@pytest.mark.slow
def test_an_unreachable_slot_reported_to_a_replica_not_yet_upgraded_waits_for_an_upgraded_one(
    tmp_path: Path, empty_database_url: str, previous_release: Subprocesses
) -> None:
    url = empty_database_url
    migrated = previous_release.run("control", "migrate", "--database-url", url)
    assert migrated.returncode == 0, migrated.stderr
    # Product time almost frozen at 03:02 CET, inside the slot's window.
    fake_clock = f"2026-11-30T02:02:00Z,anchor={time.time()!r},speed=0.001"
    previous = start_control_plane(
        stderr_path=tmp_path / "previous.stderr",
        database_url=url,
        fake_clock=fake_clock,
        args=["--no-migrate"],
        launcher=previous_release,
    )
    upgraded = None
    clients = ExitStack()
    try:
        org = previous.create_org("Acme")
        agent_key = previous.enroll_agent(org["org_id"], "web-01")["agent_key"]
        migrate.upgrade(url)
        log_lines = io.StringIO()
        outbox = Outbox(tmp_path / "outbox")
        first_try = datetime(2026, 11, 30, 2, 0, 30, tzinfo=UTC)
        # Enrolled the day before: a slot that started before the enrollment is never the
        # agent's to report (the control plane refuses it).
        with psycopg.connect(url) as conn:
            conn.execute("UPDATE agents SET created_at = %s", [first_try - timedelta(days=1)])

        def sender_to(base_url: str) -> ReportSender:
            http = clients.enter_context(
                build_http_client(base_url=base_url, credential=agent_key, timeout_seconds=60)
            )
            server_clock = ServerClock(SystemClock())
            sender = ReportSender(
                outbox=outbox,
                control=ControlPlaneClient(http=http, server_clock=server_clock),
                log=EventLog(now=lambda: datetime.now(UTC), stream=log_lines),
                now=lambda: first_try + timedelta(minutes=2),
            )
            # An upgraded replica answered this minute's config poll.
            sender.control_plane_contract = CONTRACT_VERSION
            return sender

        to_previous = sender_to(previous.base_url)
        to_previous.queue_unreachable(
            UnreachableReport(
                slot_key=SLOT,
                error="GET /v1/agent/config: cannot connect ([Errno 111] Connection refused)",
                first_tried_at=first_try,
                last_tried_at=first_try + timedelta(minutes=1),
                attempts=2,
            )
        )
        to_previous.queue_up_to_date(slot_key=SLOT, installed="1.4.1")
        to_previous.flush()
        # The run report behind it arrived; the unreachable one waits, not set aside.
        assert [r.path for r in outbox.pending()] == [UNREACHABLE_PATH]
        assert not (tmp_path / "outbox" / "rejected").exists()
        assert "report.rejected" not in log_lines.getvalue(), log_lines.getvalue()
        assert "report.waiting_for_route" in log_lines.getvalue()
        with psycopg.connect(url) as conn:
            ran = conn.execute(
                "SELECT status FROM runs WHERE slot_key = %s AND trigger = 'schedule'", [SLOT]
            ).fetchone()
        assert ran == ("up_to_date",)

        # The next minute's report reaches an upgraded replica.
        upgraded = start_control_plane(
            stderr_path=tmp_path / "upgraded.stderr",
            database_url=url,
            fake_clock=fake_clock,
            args=["--no-migrate"],
        )
        sender_to(upgraded.base_url).flush()
        assert outbox.pending() == []
        assert not (tmp_path / "outbox" / "rejected").exists()
        with psycopg.connect(url) as conn:
            kept = conn.execute("SELECT slot_key, attempts FROM unreachable_reports").fetchall()
        assert kept == [(SLOT, 2)]
        assert "Traceback" not in previous.stderr()
    finally:
        clients.close()
        previous.stop()
        if upgraded is not None:
            upgraded.stop()
