"""`agent status` says what is wrong in words: unreachable since when and why, the last refusal,
a hold, the brake, a release offered for another channel or platform."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agent_daemon.connection.config_cache import CachedConfig
from agent_daemon.connection.wire import parse_config
from agent_daemon.disk.daemon_state import DaemonState
from agent_daemon.host.activity import ActivityRecord, Refusal
from agent_daemon.host.status import AgentStatus, problems, render_status
from ground.contract import ReleaseTrack

NOW = datetime(2026, 11, 30, 2, 10, tzinfo=UTC)  # 03:10 in Amsterdam
TRACK = ReleaseTrack(channel="stable", platform="linux-x86_64")


def _status(
    *, activity: ActivityRecord | None = None, pid: int | None = 4242, **config: Any
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
        state=DaemonState(),
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
        "  ! control plane unreachable since 2026-11-30 02:58 (12 minutes ago): "
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
        "last refusal 2026-11-30 03:00 (10 minutes ago), for 2026-11-30 03:00: org_cap — "
        "the organisation's cap of 5 per minute is full"
    ]


def test_a_hold_says_until_when() -> None:
    hold = {"until": "2026-12-05T05:00:00Z", "reason": "maintenance", "set_by": "customer"}
    assert problems(_status(hold=hold)) == [
        "held until 2026-12-05 06:00 (maintenance), set by the customer: scheduled slots until "
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
