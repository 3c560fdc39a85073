"""Faults on the daemon's side, against the in-memory control plane: an update finishes inside
its window or not at all, and the record says what happened.

The updater here is the stub (one seam); `tests/agent_daemon/updater/test_swap_gate.py` runs the
real updater's side of the same rules, and `tests/faults/` the whole of it with real processes.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import get_args

import httpx
import pytest

from agent_daemon.connection.outbox import Outbox
from agent_daemon.disk.daemon_state import StateStore
from agent_daemon.minute.dispatch import MAX_DISPATCH_ATTEMPTS
from agent_daemon.updater.swap_gate import SwapAllowed, SwapRefused, SwapUnanswered, SwapVerdict
from agent_daemon.updater.update_records import UpdateOutcome, UpdateRequest
from ground.contract import AnswerCode, OutcomeReason, RefusalCode
from tests.agent_daemon.daemon_support.fake_control_plane import ClaimRefusal, FakeControlPlane
from tests.agent_daemon.daemon_support.harness import Harness
from tests.agent_daemon.daemon_support.stub_updater import StubUpdater
from tests.worlds.clocks import ManualClock

# 03:00 in Amsterdam on 2026-11-30 (CET, UTC+1) is 02:00Z; the window closes at 02:15Z.
SLOT_AT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
SLOT_KEY = "2026-11-30T03:00"


def make(tmp_path: Path, **plane: object) -> tuple[Harness, ManualClock]:
    clock = ManualClock(SLOT_AT)
    control_plane = FakeControlPlane(now=clock.now, **plane)  # type: ignore[arg-type]
    return Harness(tmp_path, control_plane, StubUpdater(), clock), clock


def failing(reason: OutcomeReason, *, times: int | None = None) -> Callable[..., object]:
    """An `on_apply` that fails in a way that may pass (`times` times, or always)."""
    calls: list[int] = []

    def apply(request: UpdateRequest) -> UpdateOutcome | None:
        calls.append(1)
        if times is not None and len(calls) > times:
            return None
        return UpdateOutcome(
            status="failed",
            version="1.4.1",
            error=f"{reason.value} (test)",
            run_id=request.run_id,
            reason=reason,
            retry=True,
        )

    return apply


def switching_when_confirmed(h: Harness) -> Callable[[UpdateRequest], UpdateOutcome | None]:
    """An `on_apply` that does what the real updater does at the swap: asks, and switches only on
    a `SwapAllowed` (the real one is tested in test_updater_swap_gate.py)."""

    def apply(request: UpdateRequest) -> UpdateOutcome | None:
        assert request.confirm_swap is not None, "the daemon always sends the question"
        verdict: SwapVerdict = request.confirm_swap()
        if isinstance(verdict, SwapAllowed):
            h.updater.installed = "1.5.0"
            return UpdateOutcome(
                status="succeeded",
                version="1.5.0",
                error=None,
                run_id=request.run_id,
                switched_at=verdict.at,
            )
        return UpdateOutcome(
            status="failed",
            version="1.4.1",
            error=verdict.error,
            run_id=request.run_id,
            reason=verdict.reason,
            retry=isinstance(verdict, SwapUnanswered),
        )

    return apply


# -- item 1: revocation honoured up to the swap -----------------------------------------------


def test_a_permitted_swap_reports_switched_at_on_the_servers_clock(tmp_path: Path) -> None:
    h, _ = make(tmp_path)
    h.updater.on_apply = switching_when_confirmed(h)
    assert h.daemon.tick() == "dispatched"
    (run,) = h.control_plane.runs.values()
    assert (run.status, run.switched_at, run.confirms) == ("succeeded", SLOT_AT, 1)
    assert "swap.permitted" in h.event_names()


@pytest.mark.parametrize(
    "code",
    [
        pytest.param(AnswerCode.TOKEN_REVOKED, id="brake_revoked_the_token"),
        pytest.param(AnswerCode.TOKEN_EXPIRED, id="token_expired"),
    ],
)
def test_a_token_revoked_before_the_swap_ends_the_run_with_its_code(
    tmp_path: Path, code: AnswerCode
) -> None:
    h, clock = make(tmp_path)

    def revoke_then_switch(request: UpdateRequest) -> UpdateOutcome | None:
        h.control_plane.revoke(request.run_id, code)
        return switching_when_confirmed(h)(request)

    h.updater.on_apply = revoke_then_switch
    assert h.daemon.tick() == "dispatched"
    (run,) = h.control_plane.runs.values()
    assert (run.status, run.reason, run.switched_at) == ("failed", code.value, None)
    assert h.updater.installed == "1.4.1"
    assert h.state().claim is None
    swap_refused = [e for e in h.events() if e["event"] == "swap.refused"]
    assert [e["code"] for e in swap_refused] == [code.value]
    clock.advance(minutes=1)
    assert h.daemon.tick() == "no_slot"


def test_an_unanswered_confirmation_does_not_switch_and_asks_again_next_minute(
    tmp_path: Path,
) -> None:
    h, clock = make(tmp_path, confirm_unavailable=True)
    h.updater.on_apply = switching_when_confirmed(h)
    assert h.daemon.tick() == "retrying"
    assert h.updater.installed == "1.4.1"
    claim = h.state().claim
    assert claim is not None
    assert claim.last_reason == OutcomeReason.PLATFORM_UNAVAILABLE
    h.control_plane.confirm_unavailable = False
    clock.advance(minutes=1)
    assert h.daemon.tick() == "dispatched"
    (run,) = h.control_plane.runs.values()
    assert (run.status, run.confirms) == ("succeeded", 2)
    assert len(h.control_plane.claims()) == 1


def test_a_manual_run_confirms_too(tmp_path: Path) -> None:
    manual = "0d7a0000-0000-4000-8000-00000000000a"
    h, _ = make(tmp_path, manual_run_id=manual, enabled=False)
    h.updater.on_apply = switching_when_confirmed(h)
    assert h.daemon.tick() == "dispatched"
    assert h.control_plane.runs[manual].confirms == 1
    assert h.control_plane.runs[manual].status == "succeeded"


def test_an_outcome_not_authorised_is_logged_as_an_error_and_never_retried(
    tmp_path: Path,
) -> None:
    h, clock = make(tmp_path)

    def switched_without_asking(request: UpdateRequest) -> UpdateOutcome:
        # What an older updater, or a defect, would report: a switch nobody confirmed.
        h.updater.installed = "1.5.0"
        return UpdateOutcome(
            status="succeeded",
            version="1.5.0",
            error=None,
            run_id=request.run_id,
            switched_at=SLOT_AT,
        )

    h.updater.on_apply = switched_without_asking
    assert h.daemon.tick() == "dispatched"
    (run,) = h.control_plane.runs.values()
    assert run.status == "unauthorised"
    refused = [e for e in h.events() if e["event"] == "report.not_authorised"]
    assert len(refused) == 1
    assert refused[0]["level"] == "error"
    assert h.outbox.pending() == []
    patches = len([r for r in h.control_plane.requests if r.startswith("PATCH")])
    clock.advance(minutes=1)
    h.daemon.tick()
    assert len([r for r in h.control_plane.requests if r.startswith("PATCH")]) == patches


# -- item 2: failures that may pass are retried inside the window -------------------------------


@pytest.mark.parametrize(
    "reason",
    [
        pytest.param(OutcomeReason.PLATFORM_UNAVAILABLE, id="control_plane_down"),
        pytest.param(OutcomeReason.DOWNLOAD_FAILED, id="download_cut"),
    ],
)
def test_a_failure_that_may_pass_is_tried_again_next_minute_inside_the_window(
    tmp_path: Path, reason: OutcomeReason
) -> None:
    h, clock = make(tmp_path)
    # More failures than MAX_DISPATCH_ATTEMPTS: they do not count against it.
    h.updater.on_apply = failing(reason, times=MAX_DISPATCH_ATTEMPTS + 2)  # type: ignore[assignment]
    for _ in range(MAX_DISPATCH_ATTEMPTS + 2):
        assert h.daemon.tick() == "retrying"
        assert h.state().claim is not None
        assert [run.status for run in h.control_plane.runs.values()] == ["claimed"]
        clock.advance(minutes=1)
    h.updater.on_apply = None
    assert h.daemon.tick() == "dispatched"
    assert [run.status for run in h.control_plane.runs.values()] == ["succeeded"]
    assert len(h.control_plane.claims()) == 1


@pytest.mark.parametrize(
    "reason",
    [
        pytest.param(OutcomeReason.PLATFORM_UNAVAILABLE, id="control_plane_down"),
        pytest.param(OutcomeReason.DOWNLOAD_FAILED, id="download_cut"),
    ],
)
def test_a_failure_that_lasts_past_the_window_ends_the_run_with_its_reason(
    tmp_path: Path, reason: OutcomeReason
) -> None:
    h, clock = make(tmp_path)
    h.updater.on_apply = failing(reason)  # type: ignore[assignment]
    for _ in range(15):
        assert h.daemon.tick() == "retrying"
        clock.advance(minutes=1)
    assert h.daemon.tick() == "dispatched"
    (run,) = h.control_plane.runs.values()
    assert (run.status, run.reason) == ("failed", reason.value)
    assert h.updater.settled_with[-1] == reason
    assert h.state().claim is None
    assert "update.window_closed" in h.event_names()


def test_a_claim_outlives_no_window_even_while_the_control_plane_is_down(tmp_path: Path) -> None:
    h, clock = make(tmp_path)
    h.updater.on_apply = failing(OutcomeReason.PLATFORM_UNAVAILABLE)  # type: ignore[assignment]
    assert h.daemon.tick() == "retrying"
    h.control_plane.online = False
    results = []
    for _ in range(16):
        clock.advance(minutes=1)
        results.append(h.daemon.tick())
    assert results.count("dispatched") == 1  # the minute its window closed
    assert results[-1] == "offline"
    assert h.state().claim is None
    assert "update.window_closed" in h.event_names()
    assert len(h.outbox.pending()) == 1
    h.control_plane.online = True
    clock.advance(minutes=1)
    h.daemon.tick()
    (run,) = h.control_plane.runs.values()
    assert (run.status, run.reason) == ("failed", "platform_unavailable")
    assert h.updater.installed == "1.4.1"


# -- item 3: after its window an interrupted update is never switched ----------------------------


def test_a_claim_found_after_its_window_is_never_dispatched(tmp_path: Path) -> None:
    h, clock = make(tmp_path)
    original = h.control_plane.handle

    def stop_when_claimed(request: httpx.Request) -> httpx.Response:
        answer = original(request)
        if request.url.path.endswith("/claims"):
            h.stop.set()  # SIGTERM right after the grant: the claim is on disk, nothing applied
        return answer

    h.control_plane.handle = stop_when_claimed  # type: ignore[method-assign]
    h.restart()
    assert h.daemon.tick() == "parked"
    h.control_plane.handle = original  # type: ignore[method-assign]
    h.stop.clear()
    clock.advance(hours=6)
    h.restart()
    assert h.updater.applied == []
    (run,) = h.control_plane.runs.values()
    assert (run.status, run.reason) == ("failed", "interrupted")
    assert h.state().claim is None
    clock.advance(minutes=1)
    assert h.daemon.tick() == "no_slot"
    assert h.updater.applied == []


# -- item 4: a full state directory -------------------------------------------------------------


def test_a_full_state_directory_cannot_hide_the_report_or_lift_the_attempt_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h, clock = make(tmp_path)
    assert h.daemon.tick() == "dispatched"  # a first night, on a disk with room
    h.control_plane.release_version = "1.6.0"
    h.updater.version_of_run = {}
    h.control_plane.times = ("03:00", "04:00")

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", "daemon-state.json")

    h.updater.on_apply = failing(OutcomeReason.DISK_FULL)  # type: ignore[assignment]
    clock.set(datetime(2026, 11, 30, 3, 0, tzinfo=UTC))
    assert h.daemon.tick() == "retrying"  # the claim reached the disk; from here it is full
    monkeypatch.setattr(StateStore, "save", disk_full)
    monkeypatch.setattr(Outbox, "put", disk_full)
    results = []
    for _ in range(MAX_DISPATCH_ATTEMPTS + 2):
        clock.advance(minutes=1)
        results.append(h.daemon.tick())
    assert results.count("dispatched") == 1
    (run,) = [r for r in h.control_plane.runs.values() if r.slot_key == "2026-11-30T04:00"]
    assert (run.status, run.reason) == ("failed", "disk_full")
    assert "outbox.write_failed" in h.event_names()
    assert "state.write_failed" in h.event_names()
    assert len(h.updater.applied) == 1 + MAX_DISPATCH_ATTEMPTS


# -- item 5: the control plane unavailable is said so --------------------------------------------


def test_database_unavailable_on_the_config_is_the_platform_unavailable(tmp_path: Path) -> None:
    h, _ = make(tmp_path)
    h.control_plane.config_body = (
        b'{"detail": {"code": "database_unavailable", "message": "the database is down"}}'
    )
    h.control_plane.config_status = 503
    assert h.daemon.tick() == "platform_unavailable"
    names = h.event_names()
    assert "platform.unavailable" in names
    assert "config.invalid" not in names
    assert "control_plane.offline" not in names


def test_database_unavailable_on_the_claim_is_not_a_refusal_nor_throttled(tmp_path: Path) -> None:
    h, _ = make(
        tmp_path,
        refuse_claims_with=ClaimRefusal(code=AnswerCode.DATABASE_UNAVAILABLE.value, status=503),
    )
    assert h.daemon.tick() == "platform_unavailable"
    names = h.event_names()
    assert "platform.unavailable" in names
    assert "claim.refused" not in names
    assert h.state().last_consumed is None


# -- item 6: a host that rolled the release back -------------------------------------------------


def test_release_rolled_back_consumes_the_slot_and_says_so_in_words(tmp_path: Path) -> None:
    h, clock = make(tmp_path, refuse_claims_with=ClaimRefusal.of(RefusalCode.RELEASE_ROLLED_BACK))
    assert h.daemon.tick() == "slot_gone"
    consumed = h.state().last_consumed
    assert consumed is not None
    assert consumed.key == SLOT_KEY
    assert h.state().recent_runs[-1].status == "release_rolled_back"
    (gone,) = [e for e in h.events() if e["event"] == "claim.slot_gone"]
    assert gone["code"] == "release_rolled_back"
    assert "rolled the offered release back" in gone["meaning"]
    clock.advance(minutes=1)
    assert h.daemon.tick() == "no_slot"
    assert len(h.control_plane.claims()) == 1


def test_a_halted_release_consumes_the_slot_and_the_agent_stops_asking(tmp_path: Path) -> None:
    h, clock = make(tmp_path, refuse_claims_with=ClaimRefusal.of(RefusalCode.RELEASE_HALTED))
    assert h.daemon.tick() == "slot_gone"
    assert h.state().recent_runs[-1].status == "release_halted"
    (gone,) = [e for e in h.events() if e["event"] == "claim.slot_gone"]
    assert "the next one asks again" in gone["meaning"]
    for _ in range(3):
        clock.advance(minutes=1)
        assert h.daemon.tick() == "no_slot"
    assert len(h.control_plane.claims()) == 1


def test_the_swap_verdicts_are_the_updaters_types() -> None:
    # The daemon's answers are exactly the three the updater knows (a guard against a fourth).
    assert {SwapAllowed, SwapRefused, SwapUnanswered} == set(get_args(SwapVerdict))
