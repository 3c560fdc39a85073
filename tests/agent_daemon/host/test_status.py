"""`nachtwacht agent status` reads like a person would say it: "03:00 — already up to date"."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent_daemon.connection.config_cache import CachedConfig
from agent_daemon.connection.wire import parse_config
from agent_daemon.disk.daemon_state import ClaimInProgress, ConsumedSlot, DaemonState, RunRecord
from agent_daemon.host.status import AgentStatus, render_status

NOW = datetime(2026, 11, 30, 2, 5, tzinfo=UTC)
CONFIG = {
    "agent_id": "4b1c9a6e-0000-4000-8000-000000000001",
    "schedule": {"enabled": True, "times": ["03:00", "15:00"]},
    "timezone": "Europe/Amsterdam",
    "catch_up_minutes": 15,
    "brake": {"engaged": True, "reason": "release 1.5.0 pulled"},
    "release": {"version": "1.5.0", "manifest_version": 42},
    "manual_update": None,
}


def status(
    state: DaemonState,
    *,
    cached: bool = True,
    pid: int | None = 4242,
    offset_seconds: float = -3.0,
) -> str:
    cache = CachedConfig(
        config=parse_config(CONFIG),
        raw=CONFIG,
        etag='"e"',
        synced_at=datetime(2026, 11, 30, 2, 4, tzinfo=UTC),
        offset_seconds=offset_seconds,
    )
    return render_status(
        AgentStatus(
            agent_id="a1",
            control_url="https://control.example",
            daemon_pid=pid,
            cached=cache if cached else None,
            state=state,
            pending_reports=2,
            installed_version="1.4.1",
            now=NOW,
            updater_step="switched: 1.4.1 -> 1.5.0 (run r2)",
        )
    )


def test_status_says_already_up_to_date_for_a_nothing_to_do_slot() -> None:
    state = DaemonState(
        last_consumed=ConsumedSlot(
            key="2026-11-30T03:00", at=datetime(2026, 11, 30, 2, tzinfo=UTC)
        ),
        recent_runs=(
            RunRecord(
                at=NOW,
                trigger="schedule",
                slot_key="2026-11-29T03:00",
                run_id="r0",
                status="succeeded",
                version="1.4.1",
            ),
            RunRecord(
                at=NOW,
                trigger="schedule",
                slot_key="2026-11-30T03:00",
                run_id=None,
                status="up_to_date",
                version="1.4.1",
            ),
        ),
    )
    text = status(state)
    assert "2026-11-30 03:00 CET — already up to date (1.4.1)" in text
    assert "2026-11-29 03:00 CET — updated to 1.4.1 [run r0]" in text
    assert text.index("2026-11-30 03:00 CET —") < text.index(
        "2026-11-29 03:00 CET —"
    )  # newest first


def test_status_shows_schedule_next_slot_brake_sync_and_daemon() -> None:
    text = status(DaemonState())
    assert "daemon:        running (pid 4242)" in text
    assert "schedule:      on, 03:00, 15:00 (Europe/Amsterdam); catch-up window 15 minutes" in text
    assert "next slot:     2026-11-30 15:00 CET (in " in text
    assert "brake:         ENGAGED (release 1.5.0 pulled)" in text
    assert "config synced: 2026-11-30 03:04 CET (60 seconds ago)" in text
    assert "outbox:        2 report(s) waiting" in text
    assert "updater:       switched: 1.4.1 -> 1.5.0 (run r2)" in text
    assert "last runs:     none yet" in text


@pytest.mark.parametrize(
    ("offset_seconds", "shown"), [(-3.0, "-3 s"), (-0.3, "+0 s"), (0.0, "+0 s"), (2.6, "+3 s")]
)
def test_status_shows_the_clock_offset_in_whole_seconds_and_never_minus_zero(
    offset_seconds: float, shown: str
) -> None:
    text = status(DaemonState(), offset_seconds=offset_seconds)
    assert f"clock offset:  {shown} (the control plane's clock)" in text


def test_status_shows_the_update_in_progress() -> None:
    claim = ClaimInProgress(
        run_id="r2",
        trigger="schedule",
        slot_key="2026-11-30T03:00",
        release_version="1.5.0",
        manifest_b64="",
        signature_b64="",
        artifact_url="https://control.example/v1/agent/runs/r2/artifact",
        claimed_at=NOW,
        phase="dispatching",
        attempts=1,
    )
    text = status(DaemonState(claim=claim))
    assert (
        "in progress:   run r2 for 2026-11-30 03:00 CET -> 1.5.0 (dispatching, attempt 1)" in text
    )


def test_status_before_the_first_sync_and_with_no_daemon() -> None:
    text = status(DaemonState(), cached=False, pid=None)
    assert "daemon:        not running" in text
    assert "config:        never synced" in text


def status_with_note(note: dict[str, object] | None, *, installed: str = "1.4.1") -> str:
    config = {**CONFIG, "brake": {"engaged": False}, "offer_note": note}
    cache = CachedConfig(
        config=parse_config(config),
        raw=config,
        etag='"e"',
        synced_at=datetime(2026, 11, 30, 2, 4, tzinfo=UTC),
        offset_seconds=0.0,
    )
    return render_status(
        AgentStatus(
            agent_id="a1",
            control_url="https://control.example",
            daemon_pid=None,
            cached=cache,
            state=DaemonState(),
            pending_reports=0,
            installed_version=installed,
            now=NOW,
        )
    )


@pytest.mark.parametrize(
    ("note", "line"),
    [
        pytest.param(
            {"reason": "pinned", "newest_version": "1.6.0"},
            "newest:        not updated to 1.6.0: pinned to another version by our operators",
            id="pinned",
        ),
        pytest.param(
            {"reason": "halted", "newest_version": "1.6.0", "detail": "disk fills"},
            "newest:        not updated to 1.6.0: its rollout is halted (by our operators, or"
            " automatically after too many failed updates) (disk fills)",
            id="halted",
        ),
        pytest.param(
            {"reason": "braked", "newest_version": "1.6.0", "detail": "bad night"},
            "newest:        not updated to 1.6.0: its rollout is paused by our operators"
            " (bad night)",
            id="braked",
        ),
        pytest.param(
            {"reason": "wave", "newest_version": "1.6.0"},
            "newest:        not updated to 1.6.0: the new release has not reached this agent in"
            " its rollout yet",
            id="canary_stage",
        ),
        pytest.param(
            {"reason": "held", "newest_version": "1.6.0", "detail": "audit"},
            "newest:        not updated to 1.6.0: the agent is on hold (audit)",
            id="held",
        ),
        pytest.param(
            {"reason": "moon_phase", "newest_version": "1.6.0"},
            "newest:        not updated to 1.6.0: reason 'moon_phase'",
            id="reason_from_a_newer_control_plane",
        ),
    ],
)
def test_status_says_why_the_newest_release_is_not_installed(
    note: dict[str, object], line: str
) -> None:
    assert line in status_with_note(note).splitlines()


def test_status_says_nothing_of_the_newest_when_nothing_stands_in_the_way() -> None:
    assert "newest:" not in status_with_note(None)


def test_status_says_nothing_of_the_newest_when_it_runs_it_already() -> None:
    note = {"reason": "braked", "newest_version": "1.6.0", "detail": "bad night"}
    assert "newest:" not in status_with_note(note, installed="1.6.0")
