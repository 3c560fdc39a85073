"""What a slot's end reports and what a bad answer costs: failed and refused updates, the outbox's
order, a bad config, a full disk, a refused credential — one line each, never the daemon.

Against an in-memory control plane (httpx.MockTransport) and a stub updater; state and outbox
are real files. The end-to-end tests repeat the important cases with real processes.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from agent_daemon.disk.daemon_state import StateStore
from agent_daemon.minute.dispatch import MAX_DISPATCH_ATTEMPTS
from agent_daemon.updater.update_records import UpdateOutcome, UpdateRequest
from ground.contract import OutcomeReason, PatchFallbackReason
from tests.agent_daemon.minute.slot_world import make


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


def test_a_full_disk_costs_one_log_line_not_the_daemon_nor_a_second_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h, clock = make(tmp_path, release_version="1.4.1")

    def no_space(store: object, state: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", "daemon-state.json")

    monkeypatch.setattr(StateStore, "save", no_space)
    assert h.daemon.tick() == "up_to_date"
    failed = [e for e in h.events() if e["event"] == "state.write_failed"]
    assert failed and "No space left" in failed[0]["error"]
    # The slot consumed in memory: the next minute of its window reports nothing again.
    clock.advance(minutes=1)
    assert h.daemon.tick() == "no_slot"
    assert h.control_plane.requests.count("POST /v1/agent/runs") == 1
    assert "tick.failed" not in h.event_names()


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


@pytest.mark.parametrize(
    ("contract", "sent"),
    [
        # A control plane of an older contract refuses a field it does not know: not sent.
        pytest.param(None, None, id="before_the_header"),
        pytest.param(3, None, id="contract_3"),
        pytest.param(4, {"kind": "full", "fallback_reason": "patch_refused"}, id="contract_4"),
    ],
)
def test_how_the_build_came_is_reported_to_a_control_plane_that_reads_it(
    tmp_path: Path, contract: int | None, sent: dict[str, str] | None
) -> None:
    h, _ = make(tmp_path, contract_version=contract)

    def fell_back(request: UpdateRequest) -> UpdateOutcome:
        return UpdateOutcome(
            status="succeeded",
            version="1.5.0",
            error=None,
            run_id=request.run_id,
            delivery="full",
            fallback_reason=PatchFallbackReason.PATCH_REFUSED,
        )

    h.updater.on_apply = fell_back
    assert h.daemon.tick() == "dispatched"
    (body,) = h.control_plane.outcome_bodies
    assert body.get("delivery") == sent
    assert ("delivery" in body) == (sent is not None)


def _switch_refused_window_closed(request: UpdateRequest) -> UpdateOutcome:
    """The updater's end of a run whose switch the control plane refused: the window closed."""
    return UpdateOutcome(
        status="failed",
        version="1.4.1",
        error="the control plane refused the switch: window_closed",
        reason=OutcomeReason.WINDOW_CLOSED,
        run_id=request.run_id,
    )


@pytest.mark.parametrize(
    ("contract", "sent"),
    [
        # A control plane of an older contract refuses a reason it does not know: the same
        # ending in the words it knows.
        pytest.param(None, "interrupted", id="before_the_header"),
        pytest.param(4, "interrupted", id="contract_4"),
        pytest.param(5, "window_closed", id="contract_5"),
    ],
)
def test_a_switch_refused_for_a_closed_window_is_reported_in_the_control_planes_words(
    tmp_path: Path, contract: int | None, sent: str
) -> None:
    h, _ = make(tmp_path, contract_version=contract)

    h.updater.on_apply = _switch_refused_window_closed
    assert h.daemon.tick() == "dispatched"
    (body,) = h.control_plane.outcome_bodies
    assert (body["status"], body["reason"]) == ("failed", sent)
    # The host's own record keeps what happened, whatever the control plane was told.
    assert h.state().recent_runs[-1].reason == "window_closed"


def test_a_closed_window_refused_by_a_replica_not_yet_upgraded_is_sent_again_as_interrupted(
    tmp_path: Path,
) -> None:
    """During a rolling upgrade the replica that said it speaks contract 5 and the one that gets
    the report may differ: the older one refuses `window_closed` (422), and a refused report is
    set aside for good. Told again in the words it knows, the run's ending still arrives."""
    older = frozenset(reason.value for reason in OutcomeReason) - {"window_closed"}
    h, _ = make(tmp_path, contract_version=5, outcome_reasons_known=older)

    h.updater.on_apply = _switch_refused_window_closed
    assert h.daemon.tick() == "dispatched"
    assert [body["reason"] for body in h.control_plane.outcome_bodies] == [
        "window_closed",
        "interrupted",
    ]
    (run,) = h.control_plane.runs.values()
    assert run.status == "failed"
    assert "report.rejected" not in h.event_names()
    assert h.state().recent_runs[-1].reason == "window_closed"
