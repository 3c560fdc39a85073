"""The five steps of a slot, each deciding whether the slot is consumed.

Against an in-memory control plane (httpx.MockTransport) and a stub updater; state and outbox are
real files. The end-to-end tests repeat the important cases with real processes.
"""

from __future__ import annotations

import errno
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent_daemon.disk.daemon_state import StateStore
from agent_daemon.minute.decision import is_current
from agent_daemon.minute.dispatch import MAX_DISPATCH_ATTEMPTS
from agent_daemon.updater.update_records import UpdateOutcome, UpdateRequest
from ground.contract import OutcomeReason
from tests.agent_daemon.daemon_support.fake_control_plane import FakeControlPlane, Run
from tests.agent_daemon.daemon_support.harness import Harness
from tests.agent_daemon.daemon_support.stub_updater import SimulatedCrash, StubUpdater
from tests.worlds.clocks import ManualClock, SkewedClock

# 03:00 in Amsterdam on 2026-11-30 (CET, UTC+1) is 02:00Z.
SLOT_AT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
SLOT_KEY = "2026-11-30T03:00"
# The contract names runs by UUID.
MANUAL_RUN_ID = "0d7a0000-0000-4000-8000-00000000000a"


def make(tmp_path: Path, *, at: datetime = SLOT_AT, **plane: object) -> tuple[Harness, ManualClock]:
    clock = ManualClock(at)
    control_plane = FakeControlPlane(now=clock.now, **plane)  # type: ignore[arg-type]
    return Harness(tmp_path, control_plane, StubUpdater(), clock), clock


def test_nothing_to_do_consumes_the_slot(tmp_path: Path) -> None:
    h, clock = make(tmp_path, release_version="1.4.1")
    assert h.daemon.tick() == "up_to_date"
    consumed = h.state().last_consumed
    assert consumed is not None
    assert consumed.key == SLOT_KEY
    assert [run.slot_key for run in h.control_plane.runs_with("up_to_date")] == [SLOT_KEY]
    assert h.control_plane.claims() == []
    clock.advance(minutes=1)
    assert h.daemon.tick() == "no_slot"
    assert len(h.control_plane.runs) == 1


def test_no_release_published_is_nothing_to_do(tmp_path: Path) -> None:
    h, _ = make(tmp_path, release_version=None)
    assert h.daemon.tick() == "up_to_date"
    assert h.control_plane.claims() == []


def test_a_newer_installed_build_is_nothing_to_do() -> None:
    assert is_current("1.6.0", "1.5.0")
    assert not is_current("1.4.1", "1.5.0")
    assert not is_current(None, "1.5.0")


def test_offline_consumes_nothing_and_updates_when_back_inside_the_window(tmp_path: Path) -> None:
    h, clock = make(tmp_path)
    h.control_plane.online = False
    assert h.daemon.tick() == "offline"
    assert h.state().last_consumed is None
    assert h.updater.applied == []
    clock.advance(minutes=10)
    assert h.daemon.tick() == "offline"
    h.control_plane.online = True
    clock.advance(minutes=1)
    assert h.daemon.tick() == "dispatched"
    assert h.state().last_consumed is not None
    assert [run.status for run in h.control_plane.runs.values()] == ["succeeded"]


def test_back_after_the_window_does_nothing_that_night_and_takes_the_next_slot(
    tmp_path: Path,
) -> None:
    h, clock = make(tmp_path, at=SLOT_AT - timedelta(minutes=5))
    h.control_plane.online = False
    for _ in range(25):
        assert h.daemon.tick() == "offline"
        clock.advance(minutes=1)
    h.control_plane.online = True
    assert clock.now() == SLOT_AT + timedelta(minutes=20)
    assert h.daemon.tick() == "no_slot"
    assert h.updater.applied == []
    clock.set(SLOT_AT + timedelta(days=1))
    assert h.daemon.tick() == "dispatched"
    assert [run.slot_key for run in h.control_plane.runs.values()] == ["2026-12-01T03:00"]


def test_a_5xx_is_offline_and_consumes_nothing(tmp_path: Path) -> None:
    h, clock = make(tmp_path)
    h.control_plane.config_body = b"<html>bad gateway</html>"
    h.control_plane.config_status = 502
    assert h.daemon.tick() == "offline"
    assert h.state().last_consumed is None
    h.control_plane.config_body = None
    clock.advance(minutes=1)
    assert h.daemon.tick() == "dispatched"


def test_throttled_consumes_nothing_and_retries_next_minute(tmp_path: Path) -> None:
    h, clock = make(tmp_path, cap_full=True)
    assert h.daemon.tick() == "throttled"
    assert h.state().last_consumed is None
    refused = [e for e in h.events() if e["event"] == "claim.refused"]
    assert refused[0]["code"] == "org_cap"
    assert refused[0]["retry_after_seconds"] == 42
    assert refused[0]["slot_key"] == SLOT_KEY
    h.control_plane.cap_full = False
    clock.advance(minutes=1)
    assert h.daemon.tick() == "dispatched"
    assert len(h.control_plane.claims()) == 2
    assert len(h.control_plane.runs) == 1


def test_brake_refusal_consumes_nothing_and_release_inside_the_window_lets_it_through(
    tmp_path: Path,
) -> None:
    h, clock = make(tmp_path, brake=True)
    assert h.daemon.tick() == "braked"
    assert h.state().last_consumed is None
    h.control_plane.brake = False
    clock.advance(minutes=3)
    assert h.daemon.tick() == "dispatched"


def test_brake_named_in_the_config_skips_the_claim_and_consumes_nothing(tmp_path: Path) -> None:
    h, _ = make(tmp_path, brake_in_config=True)
    assert h.daemon.tick() == "braked"
    assert h.control_plane.claims() == []
    assert h.state().last_consumed is None


def test_slot_consumed_on_the_server_is_consumed_locally(tmp_path: Path) -> None:
    h, clock = make(tmp_path)
    h.control_plane.consumed_at = SLOT_AT
    assert h.daemon.tick() == "slot_gone"
    assert h.state().last_consumed is not None
    assert h.state().recent_runs[-1].status == "slot_consumed"
    clock.advance(minutes=1)
    assert h.daemon.tick() == "no_slot"
    assert len(h.control_plane.claims()) == 1


def test_window_closed_on_the_server_is_consumed_locally(tmp_path: Path) -> None:
    # The server's window is shorter than the one it told the agent: the server's word counts.
    h, _ = make(tmp_path, at=SLOT_AT + timedelta(minutes=10), server_catch_up_minutes=5)
    assert h.daemon.tick() == "slot_gone"
    assert h.state().last_consumed is not None
    assert h.state().recent_runs[-1].status == "window_closed"
    assert h.updater.applied == []


def test_the_claim_is_persisted_before_dispatch(tmp_path: Path) -> None:
    h, _ = make(tmp_path)
    seen: list[object] = []

    def look_at_disk(request: UpdateRequest) -> None:
        on_disk = StateStore(tmp_path / "daemon-state.json").load()
        seen.append(on_disk)
        assert on_disk.claim is not None
        assert on_disk.claim.run_id == request.run_id
        assert on_disk.last_consumed is not None
        assert on_disk.last_consumed.key == SLOT_KEY

    h.updater.on_apply = look_at_disk
    assert h.daemon.tick() == "dispatched"
    assert len(seen) == 1
    assert h.state().claim is None


def test_crash_after_the_claim_resumes_it_and_never_claims_twice(tmp_path: Path) -> None:
    h, clock = make(tmp_path)

    def crash_before_anything(request: UpdateRequest) -> None:
        raise SimulatedCrash

    h.updater.on_apply = crash_before_anything
    with pytest.raises(SimulatedCrash):
        h.daemon.tick()
    h.updater.on_apply = None
    h.restart()
    clock.advance(minutes=1)
    assert h.daemon.tick() == "dispatched"
    assert len(h.control_plane.claims()) == 1
    assert len(h.updater.applied) == 2  # the updater is asked again; it is safe to run twice
    assert [run.status for run in h.control_plane.runs.values()] == ["succeeded"]
    clock.advance(minutes=1)
    assert h.daemon.tick() == "no_slot"


def test_crash_after_install_before_the_report_reports_without_installing_again(
    tmp_path: Path,
) -> None:
    h, clock = make(tmp_path)

    def install_then_crash(request: UpdateRequest) -> None:
        h.updater.installed = "1.5.0"
        raise SimulatedCrash

    h.updater.on_apply = install_then_crash
    with pytest.raises(SimulatedCrash):
        h.daemon.tick()
    h.updater.on_apply = None
    h.restart()
    clock.advance(minutes=1)
    assert h.daemon.tick() == "dispatched"
    assert len(h.updater.applied) == 1
    assert len(h.control_plane.claims()) == 1
    assert [run.status for run in h.control_plane.runs.values()] == ["succeeded"]


def test_an_update_found_after_its_window_is_settled_at_start_and_reported_interrupted(
    tmp_path: Path,
) -> None:
    h, clock = make(tmp_path)

    def crash(request: UpdateRequest) -> None:
        raise SimulatedCrash

    h.updater.on_apply = crash
    with pytest.raises(SimulatedCrash):
        h.daemon.tick()
    run_id = next(iter(h.control_plane.runs))
    h.updater.pending_resume = UpdateOutcome(
        status="failed",
        version="1.4.1",
        error="ended without switching",
        run_id=run_id,
        reason=OutcomeReason.INTERRUPTED,
    )
    clock.advance(hours=6)
    h.updater.settled_with.clear()
    h.restart()
    assert h.updater.settled_with == [OutcomeReason.INTERRUPTED]
    assert h.state().claim is None
    assert h.control_plane.runs[run_id].status == "failed"
    assert h.control_plane.runs[run_id].reason == "interrupted"
    assert len(h.updater.applied) == 1


def test_an_update_interrupted_inside_its_window_is_carried_on_by_the_next_minute(
    tmp_path: Path,
) -> None:
    h, clock = make(tmp_path)

    def crash(request: UpdateRequest) -> None:
        raise SimulatedCrash

    h.updater.on_apply = crash
    with pytest.raises(SimulatedCrash):
        h.daemon.tick()
    h.updater.on_apply = None
    h.updater.settled_with.clear()
    h.restart()
    assert h.updater.settled_with == []
    assert "update.pending" in h.event_names()
    clock.advance(minutes=1)
    assert h.daemon.tick() == "dispatched"
    assert [run.status for run in h.control_plane.runs.values()] == ["succeeded"]


def test_sigterm_after_the_claim_parks_and_the_restart_dispatches(tmp_path: Path) -> None:
    h, clock = make(tmp_path)
    original = h.control_plane.handle

    def stop_when_claimed(request: object) -> object:
        answer = original(request)  # type: ignore[arg-type]
        if "claims" in str(request.url):  # type: ignore[attr-defined]
            h.stop.set()
        return answer

    h.control_plane.handle = stop_when_claimed  # type: ignore[method-assign, assignment]
    h.restart()
    assert h.daemon.tick() == "parked"
    assert h.state().claim is not None
    assert h.updater.applied == []
    h.control_plane.handle = original  # type: ignore[method-assign]
    h.stop.clear()
    h.restart()
    clock.advance(minutes=1)
    assert h.daemon.tick() == "dispatched"
    assert len(h.control_plane.claims()) == 1


def test_an_update_that_keeps_raising_is_reported_failed_after_its_attempts(
    tmp_path: Path,
) -> None:
    h, clock = make(tmp_path)

    def disk_full(request: UpdateRequest) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    h.updater.on_apply = disk_full
    for _ in range(MAX_DISPATCH_ATTEMPTS):
        assert h.daemon.tick() == "error"
        clock.advance(minutes=1)
    assert h.daemon.tick() == "dispatched"
    (run,) = h.control_plane.runs.values()
    assert run.status == "failed"
    assert h.state().claim is None
    assert "tick.failed" in h.event_names()


def test_a_refused_update_is_reported_and_the_daemon_goes_on(tmp_path: Path) -> None:
    h, clock = make(tmp_path)

    def refuse(request: UpdateRequest) -> UpdateOutcome:
        return UpdateOutcome(
            status="failed", version="1.4.1", error="bad signature", run_id=request.run_id
        )

    h.updater.on_apply = refuse
    assert h.daemon.tick() == "dispatched"
    (run,) = h.control_plane.runs.values()
    assert (run.status, run.error) == ("failed", "bad signature")
    clock.advance(minutes=1)
    assert h.daemon.tick() == "no_slot"


def test_reports_wait_in_the_outbox_and_are_sent_in_order_when_answered(
    tmp_path: Path,
) -> None:
    h, clock = make(tmp_path, release_version="1.4.1")
    h.control_plane.reports_fail = True
    assert h.daemon.tick() == "up_to_date"
    assert len(h.outbox.pending()) == 1
    assert h.control_plane.runs == {}
    h.control_plane.reports_fail = False
    clock.advance(minutes=1)
    assert h.daemon.tick() == "no_slot"
    assert h.outbox.pending() == []
    assert [run.status for run in h.control_plane.runs.values()] == ["up_to_date"]


def test_a_bad_config_from_the_server_consumes_nothing_and_is_one_line(tmp_path: Path) -> None:
    h, _ = make(tmp_path)
    h.control_plane.config_body = (
        b'{"agent_id": "4b1c9a6e-0000-4000-8000-000000000001", '
        b'"schedule": {"enabled": true, "times": ["03:07"]}, '
        b'"timezone": "Europe/Amsterdam", "catch_up_minutes": 15, '
        b'"brake": {"engaged": false}}'
    )
    assert h.daemon.tick() == "bad_config"
    assert h.state().last_consumed is None
    (event,) = [e for e in h.events() if e["event"] == "config.invalid"]
    assert "03:07" in event["error"]
    assert "Traceback" not in h.log_stream.getvalue()


def test_a_config_that_is_not_json_consumes_nothing(tmp_path: Path) -> None:
    h, _ = make(tmp_path, config_body=b"\x00not json")
    assert h.daemon.tick() == "bad_config"


def test_a_full_disk_costs_one_log_line_not_the_daemon(tmp_path: Path) -> None:
    h, _ = make(tmp_path, release_version="1.4.1")

    def no_space(state: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    h.daemon._store.save = no_space  # type: ignore[method-assign]
    assert h.daemon.tick() == "error"
    failed = [e for e in h.events() if e["event"] == "tick.failed"]
    assert failed and "No space left" in failed[0]["error"]


def test_credential_refused_consumes_nothing(tmp_path: Path) -> None:
    h, _ = make(tmp_path)
    original = h.control_plane.handle

    def unknown_credential(request: object) -> object:
        import httpx

        assert isinstance(request, httpx.Request)
        request.headers["Authorization"] = "Bearer nwa_revoked"
        return original(request)

    h.control_plane.handle = unknown_credential  # type: ignore[method-assign, assignment]
    h.restart()
    assert h.daemon.tick() == "credential_refused"
    assert h.state().last_consumed is None


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
