"""One night end to end: the five steps of a slot with a real control plane on the embedded
PostgreSQL, real daemon processes on one fast fake clock, real signed builds, real install roots.

Every wait is for a product instant or an event, bounded by a generous deadline for failures;
nothing asserts how long anything took.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ground.instants import parse_instant
from tests.agent_daemon.daemon_support.features import needs_confirm_route
from tests.agent_daemon.daemon_support.night import Night, NightClock, local

pytestmark = pytest.mark.slow

SLOT = "2026-11-30T03:00"


@pytest.fixture
def new_night(
    tmp_path: Path, control_plane_server: Callable[..., Any]
) -> Iterator[Callable[..., Night]]:
    opened: list[Night] = []

    def open_night(start: str = "2026-11-30T02:57", *args: str, speed: float = 60.0) -> Night:
        # Held at `start` while the world is set up; it runs from the first daemon's start.
        clock = NightClock.held(local(start), begins=tmp_path / f"clock-{len(opened)}", speed=speed)
        scenario = Night(
            root=tmp_path / f"night-{len(opened)}",
            clock=clock,
            start_control_plane=control_plane_server,
            control_plane_args=args,
        )
        opened.append(scenario)
        return scenario

    yield open_night
    for scenario in opened:
        scenario.close()


def runs_for(scenario: Night, host: Any, slot_key: str) -> list[dict[str, Any]]:
    return [run for run in scenario.runs(host) if run.get("slot_key") == slot_key]


def updated(daemon: Any, slot_key: str) -> dict[str, Any]:
    """The `update.succeeded` event for the slot, once its report reached the control plane."""
    succeeded: dict[str, Any] = daemon.wait_for("update.succeeded", slot_key=slot_key)
    daemon.wait_for("report.delivered", run_id=succeeded["run_id"])
    return succeeded


def last_consumed(host: Any) -> object:
    """The daemon's last consumed slot; None also when no state was ever written."""
    path = host.agent.state_dir / "daemon-state.json"
    return json.loads(path.read_text()).get("last_consumed") if path.exists() else None


def test_nothing_to_do_consumes_the_slot_and_shows_on_the_agent_page(
    new_night: Callable[..., Night],
) -> None:
    scenario = new_night()
    scenario.publish("1.5.0", 42)
    host = scenario.add_host("web-01", installed=("1.5.0", 42))
    daemon = host.start()
    done = daemon.wait_for("slot.up_to_date", slot_key=SLOT)
    assert done["version"] == "1.5.0"
    daemon.wait_for("report.delivered", slot_key=SLOT)
    page = scenario.agent_page(host)
    assert [(r["slot_key"], r["status"]) for r in page["latest_runs"]] == [(SLOT, "up_to_date")]
    scenario.clock.wait_until(local("2026-11-30T03:06"))
    assert len(scenario.runs(host)) == 1
    assert daemon.named("claim.granted") == []
    assert "already up to date" in host.agent.status().stdout


@needs_confirm_route
def test_offline_consumes_nothing_and_updates_when_the_control_plane_returns_in_the_window(
    new_night: Callable[..., Night],
) -> None:
    scenario = new_night()
    scenario.publish("1.5.0", 42)
    host = scenario.add_host("web-01")
    daemon = host.start()
    daemon.wait_for("config.synced")
    port = scenario.plane.base_url.rsplit(":", 1)[1].strip("/")
    scenario.plane.stop()
    scenario.clock.wait_until(local("2026-11-30T03:02"))
    offline = daemon.wait_for("control_plane.offline", count=2)
    assert offline["level"] == "warning"
    assert last_consumed(host) is None
    scenario.control_plane_args = ("--port", port)
    scenario.restart_control_plane()
    succeeded = updated(daemon, SLOT)
    assert succeeded["version"] == "1.5.0"
    assert [r["status"] for r in runs_for(scenario, host, SLOT)] == ["succeeded"]
    assert host.current_version() == "1.5.0"
    assert host.running_version() == "1.5.0"


@needs_confirm_route
def test_back_after_the_window_does_nothing_that_night_and_takes_the_next_slot(
    new_night: Callable[..., Night],
) -> None:
    # Ten product minutes (real seconds) before 03:00: the control plane must be gone before
    # the slot opens, and a daemon's start on a loaded machine can take a few of them.
    scenario = new_night("2026-11-30T02:50")
    scenario.publish("1.5.0", 42)
    host = scenario.add_host("web-01")
    scenario.set_schedule(host, ["03:00", "03:20"])
    daemon = host.start()
    daemon.wait_for("config.synced")
    port = scenario.plane.base_url.rsplit(":", 1)[1].strip("/")
    scenario.plane.stop()
    assert daemon.named("claim.granted") == [], "the control plane stopped after 03:00"
    scenario.clock.wait_until(local("2026-11-30T03:16"))  # the 03:00 window closed at 03:15
    scenario.control_plane_args = ("--port", port)
    scenario.restart_control_plane()
    assert updated(daemon, "2026-11-30T03:20")["version"] == "1.5.0"
    assert daemon.named("claim.granted", slot_key=SLOT) == []
    assert [r["status"] for r in runs_for(scenario, host, "2026-11-30T03:20")] == ["succeeded"]
    assert all(r.get("status") != "succeeded" for r in runs_for(scenario, host, SLOT))


@needs_confirm_route
def test_throttled_with_cap_1_the_second_agent_updates_next_round(
    new_night: Callable[..., Night],
) -> None:
    scenario = new_night("2026-11-30T02:57", "--org-cap", "1")
    scenario.publish("1.5.0", 42)
    first = scenario.add_host("web-01")
    second = scenario.add_host("web-02")
    daemons = [first.start(), second.start()]
    outcomes = [updated(d, SLOT) for d in daemons]
    assert [o["version"] for o in outcomes] == ["1.5.0", "1.5.0"]
    # The cap's proof is the control plane's record: the two grants fell in different rounds.
    claimed = sorted(
        parse_instant(run["claimed_at"])
        for host in (first, second)
        for run in runs_for(scenario, host, SLOT)
    )
    assert len(claimed) == 2
    assert claimed[0].replace(second=0, microsecond=0) < claimed[1].replace(
        second=0, microsecond=0
    ), f"two grants in one round with a cap of 1: {claimed}"
    # Who was told to wait heard it as the organisation's cap, and was granted after. (On a
    # loaded machine a daemon's first tick of the slot can fall in the next round already; then
    # nobody is refused, and the rounds above still prove the cap.)
    refused = [e for d in daemons for e in d.named("claim.refused", slot_key=SLOT)]
    assert {e["code"] for e in refused} <= {"org_cap"}
    for told_to_wait in [d for d in daemons if d.named("claim.refused", slot_key=SLOT)]:
        refused_at = told_to_wait.named("claim.refused", slot_key=SLOT)[0]["server_time"]
        assert told_to_wait.wait_for("claim.granted", slot_key=SLOT)["server_time"] > refused_at
    for host in (first, second):
        assert [r["status"] for r in runs_for(scenario, host, SLOT)] == ["succeeded"]


@needs_confirm_route
def test_brake_nobody_updates_nothing_consumed_and_release_in_the_window_lets_them_through(
    new_night: Callable[..., Night],
) -> None:
    scenario = new_night()
    scenario.publish("1.5.0", 42)
    hosts = [scenario.add_host("web-01"), scenario.add_host("web-02")]
    scenario.set_brake(True)
    daemons = [host.start() for host in hosts]
    scenario.clock.wait_until(local("2026-11-30T03:05"))
    for daemon in daemons:
        daemon.wait_for("claim.braked", slot_key=SLOT)
        assert daemon.named("claim.granted") == []
    for host in hosts:
        assert last_consumed(host) is None
        assert host.current_version() == "1.4.1"
        assert runs_for(scenario, host, SLOT) == []
    scenario.set_brake(False)
    for daemon in daemons:
        assert updated(daemon, SLOT)["version"] == "1.5.0"
    for host in hosts:
        assert [r["status"] for r in runs_for(scenario, host, SLOT)] == ["succeeded"]


@needs_confirm_route
def test_killed_after_the_claim_and_before_the_report_installs_once_and_reports_once(
    new_night: Callable[..., Night],
) -> None:
    scenario = new_night()
    scenario.publish("1.5.0", 42)
    host = scenario.add_host("web-01")
    daemon = host.start()
    granted = daemon.wait_for("claim.granted", slot_key=SLOT)
    daemon.process.send_signal(signal.SIGKILL)
    daemon.kill()
    assert daemon.named("report.delivered", run_id=granted["run_id"]) == []
    restarted = host.start()
    finished = restarted.wait_for("report.delivered", run_id=granted["run_id"])
    assert finished["status"] == "succeeded"
    assert restarted.named("claim.granted") == []
    assert [r["status"] for r in runs_for(scenario, host, SLOT)] == ["succeeded"]
    assert len(scenario.runs(host)) == 1
    assert host.installed_versions().count("1.5.0") == 1
    assert host.current_version() == "1.5.0"
    assert host.running_version() == "1.5.0"


@pytest.mark.parametrize(
    ("start", "slot_key", "first", "last", "watched"),
    [
        pytest.param(
            "2026-10-25T02:20",
            "2026-10-25T02:30",
            "2026-10-25T00:30:00+00:00",  # the first 02:30 (CEST), never the second
            "2026-10-25T00:45:00+00:00",
            # Past the second 02:30 (CET, 01:30Z) and its window.
            timedelta(hours=1, minutes=20),
            id="autumn_repeat_0230_runs_once",
        ),
        pytest.param(
            "2027-03-28T01:50",  # before the gap (02:00 CET), so the daemon lives through it
            "2027-03-28T02:30",
            "2027-03-28T01:30:00+00:00",  # 03:30 CEST: shifted by the gap, not skipped
            "2027-03-28T01:45:00+00:00",
            # Past the shifted slot's window: nothing more that night.
            timedelta(minutes=20),
            id="spring_gap_0230_runs_at_0330",
        ),
    ],
)
def test_dst_nights_in_amsterdam(
    new_night: Callable[..., Night],
    start: str,
    slot_key: str,
    first: str,
    last: str,
    watched: timedelta,
) -> None:
    # Nothing is downloaded on these nights (already up to date), so a faster clock is safe.
    scenario = new_night(start, speed=120.0)
    scenario.publish("1.5.0", 42)
    host = scenario.add_host("web-01", installed=("1.5.0", 42))
    scenario.set_schedule(host, ["02:30"])
    daemon = host.start()
    done = daemon.wait_for("slot.up_to_date", slot_key=slot_key)
    ts = done["server_time"].replace("Z", "+00:00")
    assert first <= ts < last
    # Logged before its report reaches the control plane: the record is read after the delivery.
    daemon.wait_for("report.delivered", slot_key=slot_key, status="up_to_date")
    # Still one run for the night once the night's last 02:30 and its window have passed.
    scenario.clock.wait_until(datetime.fromisoformat(first) + watched)
    assert [r["slot_key"] for r in scenario.runs(host)] == [slot_key]
    assert len(daemon.named("slot.up_to_date")) == 1


@needs_confirm_route
def test_a_host_clock_hours_off_still_updates_at_0300_server_time(
    new_night: Callable[..., Night],
) -> None:
    scenario = new_night()
    scenario.publish("1.5.0", 42)
    host = scenario.add_host("web-01")
    wrong = scenario.clock.shifted(timedelta(hours=5))
    daemon = host.start(clock_setting=wrong.setting)
    synced = daemon.wait_for("config.synced")
    assert abs(synced["clock_offset_seconds"] + 5 * 3600) < 120
    succeeded = updated(daemon, SLOT)
    ts = succeeded["server_time"].replace("Z", "+00:00")
    assert "2026-11-30T02:00:00+00:00" <= ts < "2026-11-30T02:15:00+00:00"
    assert [r["status"] for r in runs_for(scenario, host, SLOT)] == ["succeeded"]


@needs_confirm_route
def test_a_manual_update_skips_the_planner_and_runs_once(new_night: Callable[..., Night]) -> None:
    scenario = new_night("2026-11-30T10:00")
    scenario.publish("1.5.0", 42)
    host = scenario.add_host("web-01")
    daemon = host.start()
    daemon.wait_for("config.synced")
    requested = scenario.panel.post(f"/v1/agents/{host.agent_id}/update")
    assert requested.status_code == 202, requested.text
    run_id = requested.json()["run_id"]
    done = daemon.wait_for("update.succeeded", run_id=run_id)
    assert done["version"] == "1.5.0"
    assert done.get("slot_key") is None
    daemon.wait_for("report.delivered", run_id=run_id)
    (run,) = scenario.runs(host)
    assert run["status"] == "succeeded"
    assert run.get("trigger") == "manual"
    scenario.clock.wait_until(scenario.clock.now() + timedelta(minutes=3))
    assert len(daemon.named("manual.granted")) == 1
    assert host.running_version() == "1.5.0"


@needs_confirm_route
def test_two_channels_each_agent_gets_its_pairs_release_and_beta_changes_nothing_for_stable(
    new_night: Callable[..., Night],
) -> None:
    scenario = new_night()
    scenario.publish("1.5.0", 42)
    scenario.publish("1.6.0-beta.1", 43, channel="beta")
    stable = scenario.add_host("web-01")
    beta = scenario.add_host("web-02", channel="beta")
    stable_daemon, beta_daemon = stable.start(), beta.start()
    assert updated(stable_daemon, SLOT)["version"] == "1.5.0"
    assert updated(beta_daemon, SLOT)["version"] == "1.6.0-beta.1"
    # A newer beta mid-night: the stable host is not offered it, at this slot or after.
    scenario.publish("1.6.0-beta.2", 44, channel="beta")
    scenario.clock.wait_until(local("2026-11-30T03:06"))
    assert stable.agent.current_version() == "1.5.0"
    assert [r["status"] for r in runs_for(scenario, stable, SLOT)] == ["succeeded"]
    assert "channel stable, platform linux-x86_64" in stable.agent.status().stdout
    for daemon in (stable_daemon, beta_daemon):
        assert daemon.named("update.failed") == []
        assert daemon.named("update.rolled_back") == []
