"""The steps of a slot that decide whether it is consumed: nothing to do, offline, the server's
refusals (throttled, brake, slot consumed, window closed).

Against an in-memory control plane (httpx.MockTransport) and a stub updater; state and outbox
are real files. The end-to-end tests repeat the important cases with real processes.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from agent_daemon.minute.decision import is_current
from tests.agent_daemon.minute.slot_world import SLOT_AT, SLOT_KEY, make


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
