"""This release's agent reporting to a replica of the previous release during a rolling upgrade:
the agent heard contract 5 from an upgraded replica, and its report of a run whose switch was
refused for a closed window reaches one that is not upgraded yet, which knows no `window_closed`.
The previous release's control plane, from this repository's history, serves the schema this
checkout migrated (expand-only)."""

from __future__ import annotations

import io
import time
from datetime import UTC, datetime
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
from ground.contract import CLAIMS_PATH, CONTRACT_VERSION, OutcomeReason
from nachtwacht.demo_world.children import Subprocesses
from nachtwacht.demo_world.control_planes import start_control_plane
from nachtwacht.demo_world.release_tooling import sign_build
from signed_release.keys import generate_key_files

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
        build = sign_build(
            version="1.5.0",
            manifest_version=42,
            keys_dir=tmp_path / "keys",
            workdir=tmp_path,
            clock_setting=fake_clock,
            launcher=previous_release,
        )
        previous.publish_release(build)
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
