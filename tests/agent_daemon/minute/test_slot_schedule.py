"""Whose clock and which schedule: a wrong host clock, the schedule off, manual updates, the DST
nights minute by minute, a corrupt state file.

Against an in-memory control plane (httpx.MockTransport) and a stub updater; state and outbox
are real files. The end-to-end tests repeat the important cases with real processes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent_daemon.updater.update_records import UpdateOutcome
from ground.contract import RefusalCode
from tests.agent_daemon.daemon_support.fake_control_plane import (
    ClaimRefusal,
    FakeControlPlane,
    Run,
)
from tests.agent_daemon.daemon_support.harness import Harness
from tests.agent_daemon.daemon_support.stub_updater import StubUpdater
from tests.agent_daemon.minute.slot_world import MANUAL_RUN_ID, SLOT_AT, SLOT_KEY, make
from tests.worlds.clocks import ManualClock, SkewedClock


def test_a_wrong_host_clock_plans_on_server_time(tmp_path: Path) -> None:
    server = ManualClock(SLOT_AT - timedelta(hours=6))  # server: 21:00 local, nothing due
    control_plane = FakeControlPlane(now=server.now)
    host = SkewedClock(server, timedelta(hours=6))  # host believes it is 03:00 local
    h = Harness(tmp_path, control_plane, StubUpdater(), host)
    assert h.daemon.tick() == "no_slot"
    assert h.updater.applied == []
    server.set(SLOT_AT)
    assert h.daemon.tick() == "dispatched"
    assert [run.slot_key for run in control_plane.runs.values()] == [SLOT_KEY]


def test_schedule_switched_off_does_nothing(tmp_path: Path) -> None:
    h, _ = make(tmp_path, enabled=False)
    assert h.daemon.tick() == "schedule_off"
    assert h.control_plane.claims() == []


def test_manual_update_skips_the_planner_and_runs_once(tmp_path: Path) -> None:
    h, clock = make(tmp_path, at=SLOT_AT + timedelta(hours=8), manual_run_id=MANUAL_RUN_ID)
    assert h.daemon.tick() == "dispatched"
    assert h.control_plane.runs[MANUAL_RUN_ID].status == "succeeded"
    assert h.state().last_consumed is None
    clock.advance(minutes=1)
    assert h.daemon.tick() == "no_slot"
    assert len(h.control_plane.claims()) == 1


def test_manual_update_while_already_current_reports_success_without_installing(
    tmp_path: Path,
) -> None:
    h, _ = make(tmp_path, at=SLOT_AT + timedelta(hours=8), manual_run_id=MANUAL_RUN_ID)
    h.updater.installed = "1.5.0"
    assert h.daemon.tick() == "dispatched"
    assert h.updater.applied == []
    assert h.control_plane.runs[MANUAL_RUN_ID].status == "succeeded"


def test_a_manual_update_refused_by_the_organisations_cap_is_claimed_again(
    tmp_path: Path,
) -> None:
    h, clock = make(tmp_path, at=SLOT_AT + timedelta(hours=8), manual_run_id=MANUAL_RUN_ID)
    h.control_plane.refuse_claims_with = ClaimRefusal.of(RefusalCode.ORG_CAP)
    assert h.daemon.tick() == "throttled"
    assert MANUAL_RUN_ID not in h.state().handled_manual_runs
    clock.advance(minutes=1)
    h.control_plane.refuse_claims_with = None
    assert h.daemon.tick() == "dispatched"
    assert h.control_plane.runs[MANUAL_RUN_ID].status == "succeeded"
    assert len(h.control_plane.claims()) == 2


def test_a_refused_manual_update_is_not_retried(tmp_path: Path) -> None:
    h, clock = make(tmp_path, at=SLOT_AT + timedelta(hours=8), manual_run_id=MANUAL_RUN_ID)
    h.control_plane.manual_run_id = MANUAL_RUN_ID
    h.control_plane.runs[MANUAL_RUN_ID] = Run(
        run_id=MANUAL_RUN_ID, trigger="manual", slot_key=None, status="succeeded"
    )
    assert h.daemon.tick() == "manual_refused"
    clock.advance(minutes=1)
    assert h.daemon.tick() == "no_slot"
    assert len(h.control_plane.claims()) == 1


@pytest.mark.parametrize(
    ("night_start", "times", "expected_keys", "expected_at"),
    [
        pytest.param(
            datetime(2026, 10, 24, 23, 0, tzinfo=UTC),
            ("02:30",),
            ["2026-10-25T02:30"],
            [datetime(2026, 10, 25, 0, 30, tzinfo=UTC)],
            id="autumn_repeat_0230_runs_once_at_the_first_instant",
        ),
        pytest.param(
            datetime(2027, 3, 27, 23, 0, tzinfo=UTC),
            ("02:30",),
            ["2027-03-28T02:30"],
            [datetime(2027, 3, 28, 1, 30, tzinfo=UTC)],  # 03:30 CEST
            id="spring_gap_0230_runs_at_0330",
        ),
    ],
)
def test_dst_nights_in_amsterdam_minute_by_minute(
    tmp_path: Path,
    night_start: datetime,
    times: tuple[str, ...],
    expected_keys: list[str],
    expected_at: list[datetime],
) -> None:
    h, clock = make(tmp_path, at=night_start, times=times, release_version="1.4.1")
    consumed_at = []
    for _ in range(6 * 60):
        if h.daemon.tick() == "up_to_date":
            consumed_at.append(clock.now())
        clock.advance(minutes=1)
    assert [run.slot_key for run in h.control_plane.runs.values()] == expected_keys
    assert consumed_at == expected_at


def test_a_corrupt_state_file_costs_log_lines_never_the_daemon_or_a_second_claim(
    tmp_path: Path,
) -> None:
    h, _ = make(tmp_path)
    (tmp_path / "daemon-state.json").write_text("{half a file")
    h.updater.pending_resume = UpdateOutcome(
        status="succeeded", version="1.5.0", error=None, run_id="r-before"
    )
    h.restart()
    assert "daemon.start_incomplete" in h.event_names()
    assert h.daemon.tick() == "error"
    assert h.control_plane.claims() == []
