"""`agent status` says in words why the last run ended as it did (every `OutcomeReason`), why a
slot was given up (`held`, `release_rolled_back`), and whether the control plane was unavailable
(our outage: it answers, but cannot serve) or unreachable (no answer at all)."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest

from agent_daemon.connection.config_cache import CachedConfig
from agent_daemon.connection.wire import parse_config
from agent_daemon.disk.daemon_state import ClaimInProgress, DaemonState, RunRecord
from agent_daemon.host.activity import Activity, ActivityRecord
from agent_daemon.host.event_log import EventLog
from agent_daemon.host.status import (
    REASON_WORDS,
    AgentStatus,
    describe_reason,
    describe_run,
    problems,
    render_status,
)
from ground.contract import OutcomeReason, RefusalCode
from ground.limits import MAX_UNREACHABLE_ERROR_LENGTH

NOW = datetime(2026, 11, 30, 2, 10, tzinfo=UTC)  # 03:10 in Amsterdam
SLOT = "2026-11-30T03:00"
CONFIG = {
    "agent_id": "4b1c9a6e-0000-4000-8000-000000000001",
    "schedule": {"enabled": True, "times": ["03:00"]},
    "timezone": "Europe/Amsterdam",
    "catch_up_minutes": 15,
    "brake": {"engaged": False},
    "release": {"version": "1.5.0", "manifest_version": 42},
}


def _status(
    state: DaemonState | None = None, activity: ActivityRecord | None = None
) -> AgentStatus:
    return AgentStatus(
        agent_id="a1",
        control_url="https://control.example",
        daemon_pid=4242,
        cached=CachedConfig(
            config=parse_config(CONFIG),
            raw=CONFIG,
            etag='"e"',
            synced_at=datetime(2026, 11, 30, 2, 0, tzinfo=UTC),
            offset_seconds=0.0,
        ),
        state=state or DaemonState(),
        pending_reports=0,
        installed_version="1.4.1",
        now=NOW,
        activity=activity,
    )


def _failed(reason: OutcomeReason | str, status: str = "failed") -> RunRecord:
    return RunRecord(
        at=NOW,
        trigger="schedule",
        slot_key=SLOT,
        run_id="r1",
        status=status,
        version="1.4.1",
        error="details",
        reason=str(reason),
    )


def test_every_outcome_reason_has_words_of_its_own() -> None:
    assert set(REASON_WORDS) == set(OutcomeReason)
    assert len(set(REASON_WORDS.values())) == len(OutcomeReason), "two reasons worded alike"


@pytest.mark.parametrize(
    "reason", [pytest.param(reason, id=reason.value) for reason in OutcomeReason]
)
def test_the_last_runs_reason_is_said_in_words(reason: OutcomeReason) -> None:
    line = describe_run(_failed(reason), None)
    assert line == (
        f"2026-11-30 03:00 — update failed (1.4.1), because {REASON_WORDS[reason]}: details "
        "[run r1]"
    )
    assert reason.value not in line.replace(REASON_WORDS[reason], ""), "words, not the code"


def test_a_rolled_back_run_says_why_it_was_rolled_back() -> None:
    line = describe_run(_failed(OutcomeReason.HEALTH_CHECK_FAILED, "rolled_back"), None)
    assert line.startswith(
        "2026-11-30 03:00 — update failed and was rolled back (1.4.1), because the new version "
        "was not healthy in time"
    )


def test_a_reason_this_agent_does_not_know_is_named_as_it_is() -> None:
    assert describe_reason("solar_flare") == "reason 'solar_flare'"


def test_the_last_failed_run_comes_first_under_attention() -> None:
    state = DaemonState(recent_runs=(_failed(OutcomeReason.PLATFORM_UNAVAILABLE),))
    assert problems(_status(state)) == [
        "the last run did not update: 2026-11-30 03:00 CET — update failed (1.4.1), because our "
        "control plane was unavailable until the window closed: details [run r1]"
    ]


def test_a_last_run_that_succeeded_is_no_problem() -> None:
    record = RunRecord(
        at=NOW, trigger="schedule", slot_key=SLOT, run_id="r1", status="succeeded", version="1.5.0"
    )
    assert problems(_status(DaemonState(recent_runs=(record,)))) == []


@pytest.mark.parametrize(
    ("code", "words"),
    [
        pytest.param(RefusalCode.HELD, "skipped: the agent is on hold", id="held"),
        pytest.param(
            RefusalCode.RELEASE_ROLLED_BACK,
            "skipped: this agent rolled the release back before; it waits for a newer one",
            id="release_rolled_back",
        ),
        pytest.param(
            RefusalCode.RELEASE_HALTED,
            "skipped: the rollout of its release is stopped (halted, or paused by its own brake)",
            id="release_halted",
        ),
    ],
)
def test_a_slot_given_up_says_why_in_words(code: RefusalCode, words: str) -> None:
    record = RunRecord(
        at=NOW,
        trigger="schedule",
        slot_key=SLOT,
        run_id=None,
        status=code.value,
        version="1.4.1",
        error="the control plane's message",
    )
    assert describe_run(record, None) == (
        f"2026-11-30 03:00 — {words} (1.4.1): the control plane's message"
    )
    text = render_status(_status(DaemonState(recent_runs=(record,))))
    assert f"  2026-11-30 03:00 CET — {words} (1.4.1)" in text
    assert "attention:" not in text, "a slot given up on purpose is not something wrong"


def test_the_platform_unavailable_is_our_outage_not_an_unreachable_host() -> None:
    activity = ActivityRecord(
        platform_unavailable_since=datetime(2026, 11, 30, 2, 2, tzinfo=UTC),
        platform_unavailable_error="GET /v1/agent/config: 503 database_unavailable",
    )
    found = problems(_status(activity=activity))
    assert found == [
        "the control plane is unavailable since 2026-11-30 03:02 CET (8 minutes ago): it answers, "
        "but cannot serve (GET /v1/agent/config: 503 database_unavailable) — an outage on the "
        "platform's side, not this host's network; updates are tried again inside their window"
    ]
    assert not any("unreachable" in sentence for sentence in found)


def test_an_unreachable_control_plane_is_not_called_unavailable() -> None:
    activity = ActivityRecord(
        unreachable_since=datetime(2026, 11, 30, 2, 2, tzinfo=UTC),
        unreachable_error="GET /v1/agent/config: cannot connect (connection refused)",
    )
    found = problems(_status(activity=activity))
    assert len(found) == 1 and found[0].startswith("control plane unreachable since 2026-11-30")
    assert "unavailable" not in found[0] and "platform's side" not in found[0]


@pytest.mark.parametrize(
    ("reason", "words"),
    [
        pytest.param(
            OutcomeReason.PLATFORM_UNAVAILABLE,
            "the control plane is unavailable (an outage on the platform's side, not this "
            "host's network)",
            id="platform_unavailable",
        ),
        pytest.param(
            OutcomeReason.DOWNLOAD_FAILED,
            "the download was cut and resumes where it stopped",
            id="download_failed",
        ),
        pytest.param(OutcomeReason.DISK_FULL, "the disk is full", id="disk_full"),
    ],
)
def test_an_update_waiting_out_a_failure_says_which(reason: OutcomeReason, words: str) -> None:
    claim = ClaimInProgress(
        run_id="r1",
        trigger="schedule",
        slot_key=SLOT,
        release_version="1.5.0",
        manifest_b64="",
        signature_b64="",
        artifact_url="https://control.example/a",
        claimed_at=datetime(2026, 11, 30, 2, 1, tzinfo=UTC),
        phase="dispatching",
        attempts=1,
        last_reason=reason,
    )
    assert problems(_status(DaemonState(claim=claim))) == [
        f"the update to 1.5.0 for 2026-11-30 03:00 CET is waiting: {words}; tried again next "
        "minute while its window is open"
    ]


# -- where the words come from: the activity file learns the platform's outage ------------------


def _listening_activity() -> tuple[Activity, EventLog]:
    log = EventLog(now=lambda: NOW, stream=io.StringIO())
    activity = Activity(now=lambda: NOW, log=log, file=None, stuck_after=10, idle_after=100)
    return activity, log


def test_the_activity_learns_that_the_platform_is_unavailable_until_a_minute_ends_otherwise() -> (
    None
):
    activity, log = _listening_activity()
    activity.tick_started()
    log.emit("platform.unavailable", level="warning", step="config", error="503 unavailable")
    activity.tick_finished("platform_unavailable", None)
    record = activity.record
    assert (record.platform_unavailable_since, record.platform_unavailable_error) == (
        NOW,
        "503 unavailable",
    )
    assert record.unreachable_since is None, "our outage is not an unreachable control plane"
    activity.tick_started()
    activity.tick_finished("no_slot", None)
    assert activity.record.platform_unavailable_since is None


def test_an_unreachable_control_plane_is_not_learned_as_unavailable() -> None:
    activity, log = _listening_activity()
    log.emit("control_plane.offline", level="warning", error="cannot connect")
    activity.tick_finished("offline", None)
    assert activity.record.platform_unavailable_since is None
    assert activity.record.unreachable_since == NOW


# Through a proxy an unreachable control plane's error names the proxy's own answer, the proxy
# and what to check: well past the 160 characters other lines are cut at.
_PROXIED = (
    "GET /v1/agent/config: 403 Filtered (an HTML page) through the proxy http://127.0.0.1:3128 "
    "(agent.toml proxy), not the control plane's answer: the proxy, or a server between it and "
    "https://control.example, refuses the request (check the proxy's rules for the control "
    "plane's host); the agent's own credential was not judged"
)


def test_an_unreachable_error_through_a_proxy_is_shown_whole() -> None:
    activity, log = _listening_activity()
    activity.tick_started()
    log.emit("control_plane.offline", level="warning", step="config", error=_PROXIED)
    record = activity.record
    assert record.unreachable_error == _PROXIED
    assert record.doing.endswith(_PROXIED)


def test_an_error_longer_than_the_bound_is_cut_with_an_ellipsis() -> None:
    activity, log = _listening_activity()
    activity.tick_started()
    log.emit("control_plane.credential_refused", level="error", error="x" * 2000)
    error = activity.record.credential_refused_error
    assert error is not None and len(error) == MAX_UNREACHABLE_ERROR_LENGTH
    assert error.endswith("…")
