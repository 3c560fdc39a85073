"""A slot's claim kept across crashes, restarts and SIGTERM: persisted before dispatch, never
claimed twice, an interrupted update carried on inside its window or settled after it.

Against an in-memory control plane (httpx.MockTransport) and a stub updater; state and outbox
are real files. The end-to-end tests repeat the important cases with real processes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_daemon.disk.daemon_state import StateStore
from agent_daemon.updater.update_records import UpdateOutcome, UpdateRequest
from ground.contract import OutcomeReason
from tests.agent_daemon.daemon_support.stub_updater import SimulatedCrash
from tests.agent_daemon.minute.slot_world import SLOT_KEY, make


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
