"""`agent status` says what is wrong in words: a refused credential, a daemon that does not run,
unreachable since when and why, the last refusal, a hold, the brake, a release offered for
another channel or platform; and an update requested now that is not taken up yet."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime
from typing import Any

from agent_daemon.connection.config_cache import CachedConfig
from agent_daemon.connection.wire import parse_config
from agent_daemon.disk.daemon_state import DaemonState
from agent_daemon.disk.unreachable_file import UnreachableSlot
from agent_daemon.host.activity import ActivityRecord, Refusal
from agent_daemon.host.status import AgentStatus, problems, render_status
from ground.contract import ReleaseTrack

NOW = datetime(2026, 11, 30, 2, 10, tzinfo=UTC)  # 03:10 in Amsterdam
TRACK = ReleaseTrack(channel="stable", platform="linux-x86_64")


def _status(
    *,
    activity: ActivityRecord | None = None,
    pid: int | None = 4242,
    state: DaemonState | None = None,
    **config: Any,
) -> AgentStatus:
    document = {
        "agent_id": "4b1c9a6e-0000-4000-8000-000000000001",
        "schedule": {"enabled": True, "times": ["03:00"]},
        "timezone": "Europe/Amsterdam",
        "catch_up_minutes": 15,
        "brake": {"engaged": False},
        "release": {
            "version": "1.5.0",
            "manifest_version": 42,
            "channel": "stable",
            "platform": "linux-x86_64",
        },
        **config,
    }
    return AgentStatus(
        agent_id="a1",
        control_url="https://control.example",
        daemon_pid=pid,
        cached=CachedConfig(
            config=parse_config(document),
            raw=document,
            etag='"e"',
            synced_at=datetime(2026, 11, 30, 1, 50, tzinfo=UTC),
            offset_seconds=0.0,
        ),
        state=state or DaemonState(),
        pending_reports=0,
        installed_version="1.4.1",
        now=NOW,
        activity=activity,
        track=TRACK,
    )


def test_a_healthy_agent_has_nothing_to_say() -> None:
    assert problems(_status(activity=ActivityRecord(doing="waiting for 03:00"))) == []
    assert "attention:" not in render_status(_status())


def test_unreachable_says_since_when_and_why() -> None:
    activity = ActivityRecord(
        doing="control plane unreachable since 02:58",
        unreachable_since=datetime(2026, 11, 30, 1, 58, tzinfo=UTC),
        unreachable_error="GET /v1/agent/config: cannot connect (connection refused)",
    )
    text = render_status(_status(activity=activity))
    assert (
        "  ! control plane unreachable since 2026-11-30 02:58 CET (12 minutes ago): "
        "GET /v1/agent/config: cannot connect (connection refused)"
    ) in text
    assert "doing:         control plane unreachable since 02:58" in text


def test_the_last_refusal_says_why() -> None:
    activity = ActivityRecord(
        last_refusal=Refusal(
            at=datetime(2026, 11, 30, 2, 0, tzinfo=UTC),
            code="org_cap",
            message="the organisation's cap of 5 per minute is full",
            slot_key="2026-11-30T03:00",
        )
    )
    assert problems(_status(activity=activity)) == [
        "last refusal 2026-11-30 03:00 CET (10 minutes ago), for 2026-11-30 03:00 CET: org_cap — "
        "the organisation's cap of 5 per minute is full"
    ]


def test_a_hold_says_until_when() -> None:
    hold = {"until": "2026-12-05T05:00:00Z", "reason": "maintenance", "set_by": "customer"}
    assert problems(_status(hold=hold)) == [
        "held until 2026-12-05 06:00 CET (maintenance), set by the customer: scheduled slots until "
        "then are skipped"
    ]


def test_a_hold_that_has_ended_is_not_mentioned() -> None:
    hold = {"until": "2026-11-30T02:00:00Z", "set_by": "agent"}
    assert problems(_status(hold=hold)) == []


def test_a_release_for_another_channel_says_which_and_where_to_fix_it() -> None:
    release = {
        "version": "1.6.0-beta",
        "manifest_version": 50,
        "channel": "beta",
        "platform": "linux-x86_64",
    }
    assert problems(_status(release=release)) == [
        "the offered release 1.6.0-beta is for channel 'beta', not this agent's (channel "
        "'stable', platform 'linux-x86_64'): check `channel` and `platform` in agent.toml"
    ]


def test_the_brake_is_a_problem_in_words() -> None:
    brake = {"engaged": True, "reason": "release 1.5.0 pulled"}
    assert problems(_status(brake=brake)) == [
        "the operators' brake is engaged (release 1.5.0 pulled): no scheduled update is granted"
    ]


# -- a refused credential, a stopped daemon, a requested update ----------------------------------

REQUESTED = {
    "run_id": "7d0c0000-0000-4000-8000-0000000000aa",
    "requested_at": "2026-11-30T02:02:00Z",
}


def test_a_credential_the_control_plane_refuses_comes_first() -> None:
    activity = ActivityRecord(
        doing="the control plane refuses the credential: …",
        credential_refused_since=datetime(2026, 11, 30, 2, 1, tzinfo=UTC),
        credential_refused_error="GET /v1/agent/config: the control plane refused the agent's "
        "credential (401 Unauthorized (unknown or revoked credential)); re-enroll the agent",
    )
    found = problems(_status(activity=activity))
    assert found[0].startswith(
        "the control plane refuses this agent's credential since 2026-11-30 03:01 CET (9 minutes "
        "ago): GET /v1/agent/config: the control plane refused"
    )
    assert found[0].endswith("nothing is updated until the agent is enrolled again")


def test_the_refused_credential_is_still_said_after_the_daemon_stopped() -> None:
    activity = ActivityRecord(
        updated_at=datetime(2026, 11, 30, 2, 1, tzinfo=UTC),
        doing="the control plane refuses the credential: 401",
        credential_refused_since=datetime(2026, 11, 30, 1, 1, tzinfo=UTC),
        credential_refused_error="401",
    )
    found = problems(_status(activity=activity, pid=None))
    assert [line.split(" since ")[0].split(" (")[0] for line in found] == [
        "the control plane refuses this agent's credential",
        "the daemon is not running",
    ]


def test_a_daemon_that_does_not_run_is_named_with_when_it_was_last_seen() -> None:
    activity = ActivityRecord(
        updated_at=datetime(2026, 11, 30, 1, 10, tzinfo=UTC), doing="waiting for 03:00 CET"
    )
    (line,) = problems(_status(activity=activity, pid=None))
    assert line.startswith(
        "the daemon is not running (last seen 60 minutes ago: waiting for 03:00 CET): nothing is "
        "updated until it runs again (systemctl start nachtwacht-agent"
    )


def test_a_requested_update_not_taken_up_yet_is_shown() -> None:
    text = render_status(_status(manual_update=REQUESTED))
    assert (
        "update-now:    requested at 2026-11-30 03:02 CET (run "
        "7d0c0000-0000-4000-8000-0000000000aa), not started yet: it waits for the daemon's next "
        "minute"
    ) in text
    stopped = _status(manual_update=REQUESTED, pid=None)
    assert "it waits for the daemon\n" in render_status(stopped) + "\n"
    assert problems(stopped)[0].endswith(
        "; the update requested at 2026-11-30 03:02 CET (run 7d0c0000-0000-4000-8000-0000000000aa) "
        "waits for it"
    )


def test_a_requested_update_the_daemon_took_up_is_not_pending() -> None:
    handled = DaemonState(handled_manual_runs=(REQUESTED["run_id"],))
    assert "update-now:" not in render_status(_status(manual_update=REQUESTED, state=handled))


def test_every_time_status_shows_carries_the_platforms_zone() -> None:
    activity = ActivityRecord(
        unreachable_since=datetime(2026, 11, 30, 1, 58, tzinfo=UTC), unreachable_error="refused"
    )
    text = render_status(_status(activity=activity, manual_update=REQUESTED))
    times = re.findall(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}(?::\d{2})?(?: [A-Z]{3,4})?", text)
    assert times, text
    assert all(found.endswith(" CET") for found in times), times
    assert "UTC" not in text
    assert "T14:00:00Z" not in text


def test_a_host_clock_beyond_the_bound_is_named_first_thing() -> None:
    """A host more than a day off plans on the wrong day and asks for no slot; the control
    plane records the miss as `host_clock`. `agent status` names the clock, and the miss in the
    panel's words."""
    status = _status()
    assert status.cached is not None
    off = dataclasses.replace(
        status, cached=dataclasses.replace(status.cached, offset_seconds=86400.0)
    )
    text = render_status(off)
    assert "  ! this host's clock is more than a day off the control plane's" in text
    assert "set the host's clock right (NTP)" in text
    assert "(host_clock: the host's clock was more than a day off;" in text
    behind = dataclasses.replace(
        status, cached=dataclasses.replace(status.cached, offset_seconds=-86400.0)
    )
    assert any("more than a day off" in line for line in problems(behind))
    # Hours off is followed: nothing to say.
    hours = dataclasses.replace(
        status, cached=dataclasses.replace(status.cached, offset_seconds=-5 * 3600.0)
    )
    assert problems(hours) == []


def test_a_slot_tried_without_reaching_the_control_plane_is_named_with_what_to_do() -> None:
    noted = UnreachableSlot(
        slot_key="2026-11-30T03:00",
        slot_at=datetime(2026, 11, 30, 2, 0, tzinfo=UTC),
        error="GET /v1/agent/config: cannot connect \x1b[2J(connection refused)",
        first_tried_at=datetime(2026, 11, 30, 2, 1, tzinfo=UTC),
        last_tried_at=datetime(2026, 11, 30, 2, 9, tzinfo=UTC),
        attempts=9,
    )
    text = render_status(dataclasses.replace(_status(), unreachable_slots=(noted,)))
    assert (
        "  ! 2026-11-30 03:00 CET: the agent was running but could not reach the control plane in"
        " its window (9 tries, 2026-11-30 03:01 CET to 2026-11-30 03:09 CET): GET"
        " /v1/agent/config: cannot connect \ufffd[2J(connection refused) — check this host's"
        " proxy, firewall and DNS, or the control plane's status page;"
    ) in text
    assert "\x1b" not in text
    assert "records the miss as unreachable" in text


def test_a_slot_tried_once_says_one_try_and_when() -> None:
    noted = UnreachableSlot(
        slot_key="2026-11-30T03:00",
        slot_at=datetime(2026, 11, 30, 2, 0, tzinfo=UTC),
        error="GET /v1/agent/config: 403 Filtered (an HTML page)",
        first_tried_at=datetime(2026, 11, 30, 2, 0, tzinfo=UTC),
        last_tried_at=datetime(2026, 11, 30, 2, 0, tzinfo=UTC),
    )
    text = render_status(dataclasses.replace(_status(), unreachable_slots=(noted,)))
    assert "in its window (1 try, at 2026-11-30 03:00 CET): GET /v1/agent/config" in text
    assert "1 tries" not in text


def test_a_report_of_an_unreachable_slot_waiting_in_the_outbox_is_named() -> None:
    waiting = dataclasses.replace(_status(), unreachable_reports_waiting=("2026-11-30T03:00",))
    text = render_status(waiting)
    assert (
        "  ! 2026-11-30 03:00 CET: the agent could not reach the control plane in its window, and"
        " the report saying so waits in the outbox for a control plane that takes it"
    ) in text
    assert "for up to 7 days after the slot; until then the miss reads offline" in text
    assert problems(_status()) == []
