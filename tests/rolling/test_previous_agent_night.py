"""Last month's agent, tonight's control plane: the previous release's agent (its `agent enroll`
and its daemon, from `git archive` of the commit in `previous_release.txt`) updates through a
control plane of this checkout — real HTTP, a real signed release, a real daemon process on the
night's fast clock — and nothing in this control plane's answers trips it.

The host's folders, its managed agent and the night are this checkout's world kit; everything the
agent itself runs (`nachtwacht agent …`, the updater inside the daemon) is the previous release's.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest

from nachtwacht.demo_world import daemons
from nachtwacht.demo_world.children import Subprocesses
from tests.agent_daemon.daemon_support.night import (
    DOWNLOAD_LIMITS,
    HEALTH_DEADLINE_SECONDS,
    REQUEST_TIMEOUT_SECONDS,
    Host,
    Night,
    NightClock,
    _add_to_config,
    local,
)
from tests.worlds.daemons import DaemonProcess, agent_environment
from tests.worlds.hosts import AgentHost

pytestmark = pytest.mark.slow

SLOT = "2026-11-30T03:00"


@pytest.fixture
def night(tmp_path: Path, control_plane_server: Callable[..., Any]) -> Iterator[Night]:
    clock = NightClock.held(local("2026-11-30T02:57"), begins=tmp_path / "clock", speed=60.0)
    scenario = Night(root=tmp_path / "night", clock=clock, start_control_plane=control_plane_server)
    yield scenario
    scenario.close()


def add_previous_release_host(night: Night, name: str, release: Subprocesses) -> Host:
    """A host enrolled by the previous release's `agent enroll`, 1.4.1 installed before the
    night (as `Night.add_host` does it with this checkout's agent)."""
    enrolled = night.plane.enroll_agent(night.org_id, name)
    agent = AgentHost(night.root / name, keys_dir=night.keys_dir, launcher=release)
    agent.prepare()
    night.supervisor.add(agent)
    night._preinstall(agent, "1.4.1", 41)
    result = agent.enroll(
        night.plane.base_url,
        enrolled["agent_key"],
        "--restart-command", " ".join(agent.restart_command),
        "--health-command", " ".join(agent.health_command),
        "--health-deadline-seconds", HEALTH_DEADLINE_SECONDS,
        "--request-timeout-seconds", REQUEST_TIMEOUT_SECONDS,
        env={"NACHTWACHT_FAKE_CLOCK": night.clock.setting},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    _add_to_config(agent.state_dir / "agent.toml", DOWNLOAD_LIMITS)
    host = Host(
        name=name,
        agent_id=enrolled["agent_id"],
        agent=agent,
        clock_setting=night.clock.setting,
        begin=night.clock.begin,
    )
    night.hosts.append(host)
    return host


def start_previous_release_daemon(host: Host, release: Subprocesses) -> DaemonProcess:
    """The previous release's `agent run`, an interpreter of its own importing its tree."""
    host.begin()
    stderr_path = host.agent.root / f"daemon-{time.monotonic_ns()}.stderr"
    env = agent_environment(NACHTWACHT_FAKE_CLOCK=host.clock_setting)
    with stderr_path.open("wb") as stderr:
        process = daemons.launch_daemon(
            host.agent.state_dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            interpreters=release,
        )
    daemon = DaemonProcess(process=process, stderr_path=stderr_path)
    host.daemons.append(daemon)
    return daemon


def test_the_previous_releases_agent_updates_through_this_control_plane(
    night: Night, previous_release: Subprocesses
) -> None:
    night.publish("1.5.0", 42)
    host = add_previous_release_host(night, "web-01", previous_release)
    daemon = start_previous_release_daemon(host, previous_release)

    succeeded = daemon.wait_for("update.succeeded", slot_key=SLOT)
    delivered = daemon.wait_for("report.delivered", run_id=succeeded["run_id"])
    assert succeeded["version"] == "1.5.0"
    assert delivered["status"] == "succeeded"

    # Polled, claimed, downloaded, verified, swapped and reported: the control plane's record.
    runs = [run for run in night.runs(host) if run["slot_key"] == SLOT]
    assert [run["status"] for run in runs] == ["succeeded"]
    assert host.current_version() == "1.5.0"
    assert host.running_version() == "1.5.0"
    page = night.agent_page(host)
    assert [(r["slot_key"], r["status"]) for r in page["latest_runs"]] == [(SLOT, "succeeded")]

    # Nothing this control plane answered tripped the older agent: no error, no traceback.
    names = daemon.event_names()
    for step in ("config.synced", "claim.granted", "update.succeeded", "report.delivered"):
        assert step in names, names
    errors = [event for event in daemon.events if event.get("level") in {"error", "critical"}]
    assert errors == [], errors
    assert "Traceback" not in daemon.stderr(), daemon.stderr()
    assert daemon.other_lines == [], daemon.other_lines


@pytest.fixture
def afternoon(tmp_path: Path, control_plane_server: Callable[..., Any]) -> Iterator[Night]:
    # 10:00: no scheduled slot is due; an organisation cap of 1 a round.
    clock = NightClock.held(local("2026-11-30T10:00"), begins=tmp_path / "clock", speed=60.0)
    scenario = Night(
        root=tmp_path / "night",
        clock=clock,
        start_control_plane=control_plane_server,
        control_plane_args=("--org-cap", "1"),
    )
    yield scenario
    scenario.close()


def test_the_previous_releases_agent_is_granted_an_update_now_outside_the_caps(
    afternoon: Night, previous_release: Subprocesses
) -> None:
    # It ends a manual request on any refusal and tells nobody, so a cap never refuses it: its
    # grant is not counted in a round, and its request does not stay pending.
    night = afternoon
    night.publish("1.5.0", 42)
    host = add_previous_release_host(night, "web-01", previous_release)
    daemon = start_previous_release_daemon(host, previous_release)
    daemon.wait_for("config.synced")
    requested = night.panel.post(f"/v1/agents/{host.agent_id}/update")
    assert requested.status_code == 202, requested.text
    run_id = requested.json()["run_id"]
    succeeded = daemon.wait_for("update.succeeded", run_id=run_id)
    daemon.wait_for("report.delivered", run_id=run_id)
    assert succeeded["version"] == "1.5.0"
    (run,) = night.runs(host)
    assert (run["trigger"], run["status"]) == ("manual", "succeeded")
    with psycopg.connect(night.plane.database_url) as conn:
        counted = conn.execute(
            "SELECT t.round_start, e.data ->> 'through_caps' FROM tokens t"
            " JOIN events e ON e.run_id = t.run_id AND e.kind = 'update.started'"
            " WHERE t.run_id = %s",
            [UUID(run_id)],
        ).fetchall()
    assert counted == [(None, "false")]
    assert daemon.named("manual.refused") == []


def test_the_previous_releases_agent_days_off_is_served_and_misses_as_before(
    night: Night, previous_release: Subprocesses
) -> None:
    """It sends no `Date`: the control plane cannot tell its host's clock, serves it as ever,
    and its missed slot keeps the reason it had (`unknown`), never `host_clock`."""
    night.publish("1.5.0", 42)
    host = add_previous_release_host(night, "web-01", previous_release)
    host.clock_setting = night.clock.shifted(-timedelta(days=3)).setting
    daemon = start_previous_release_daemon(host, previous_release)
    daemon.wait_for("config.synced")
    while not [run for run in night.runs(host) if run["slot_key"] == SLOT]:
        assert night.clock.now() < local("2026-11-30T03:40"), "no pass recorded the miss"
        night.clock.wait_until(night.clock.now() + timedelta(minutes=1))
    runs = [(r["status"], r["miss_reason"]) for r in night.runs(host) if r["slot_key"] == SLOT]
    assert runs == [("missed", "unknown")]
    with psycopg.connect(night.plane.database_url) as conn:
        kept = conn.execute("SELECT count(*) FROM agent_clocks").fetchone()
    assert kept == (0,)
    assert "Traceback" not in daemon.stderr(), daemon.stderr()
