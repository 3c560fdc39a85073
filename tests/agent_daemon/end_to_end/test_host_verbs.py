"""`nachtwacht agent update-now | hold | release-hold` as real processes against a real control
plane (embedded PostgreSQL, loopback HTTP). The hold's route is built in parallel: its tests run
once the app offers it."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from control_plane.answers_cache.memory import FRESHNESS_SECONDS
from control_plane.api.app import create_app
from control_plane.registry import Services
from ground.clock import SystemClock
from ground.contract import CONFIG_PATH, HOLD_PATH
from tests.worlds.daemons import run_agent
from tests.worlds.hosts import AgentHost

pytestmark = pytest.mark.slow


def _offered_paths() -> set[str]:
    # The routes are declared statically: the OpenAPI document needs no database.
    app = create_app(cast(Services, None), SystemClock())
    return set(app.openapi()["paths"])


HOLD_OFFERED = HOLD_PATH in _offered_paths()


@pytest.fixture
def enrolled(
    control_plane_server: Callable[..., Any], tmp_path: Path
) -> tuple[AgentHost, dict[str, str], Any, dict[str, str]]:
    plane = control_plane_server()
    org = plane.create_org("Acme")
    agent = plane.enroll_agent(org["org_id"], "web-01")
    host = AgentHost(tmp_path / "host")
    result = host.enroll(plane.base_url, agent["agent_key"])
    assert result.returncode == 0, result.stderr
    return host, agent, plane, org


def _config(plane: Any, agent: dict[str, str]) -> dict[str, Any]:
    answer = httpx.get(
        plane.base_url.rstrip("/") + CONFIG_PATH,
        headers={"Authorization": f"Bearer {agent['agent_key']}"},
    )
    assert answer.status_code == 200, answer.text
    document: dict[str, Any] = answer.json()
    return document


def _config_once(
    plane: Any, agent: dict[str, str], shows: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The config as soon as it shows the change: the control plane answers config polls from
    memory and honours a write within FRESHNESS_SECONDS (docs/control_plane.md "Hot path");
    past that bound (and a margin for a loaded machine) the old answer is a defect."""
    deadline = time.monotonic() + FRESHNESS_SECONDS + 5.0
    while True:
        document = _config(plane, agent)
        if shows(document) or time.monotonic() > deadline:
            return document
        time.sleep(0.1)


def test_update_now_files_a_manual_run_the_agent_learns_from_its_config(
    enrolled: tuple[AgentHost, dict[str, str], Any, dict[str, str]],
) -> None:
    host, agent, plane, org = enrolled
    state = ("--state-dir", str(host.state_dir))
    first = run_agent("update-now", *state, "--timeout-seconds", "0.1")
    # No daemon runs here: the request is filed, and the command says it cannot follow it.
    assert first.returncode == 1, first.stderr
    assert first.stderr == ""
    assert "update requested (run " in first.stdout
    assert "the daemon is not running: the request stays filed" in first.stdout
    run_id = first.stdout.split("(run ", 1)[1].split(")", 1)[0]
    config = _config_once(plane, agent, lambda c: c.get("manual_update") is not None)
    assert config["manual_update"]["run_id"] == run_id
    # Asked again while it is pending: the same run, not a second one.
    again = run_agent("update-now", *state, "--timeout-seconds", "0.1")
    assert f"(run {run_id})" in again.stdout
    # The trail says who asked: the agent (on its host), not a user of the panel.
    events = httpx.get(
        f"{plane.base_url.rstrip('/')}/v1/agents/{agent['agent_id']}/events",
        headers={"Authorization": f"Bearer {org['panel_key']}"},
    )
    assert events.status_code == 200, events.text
    requested = [e for e in events.json()["events"] if e["kind"] == "update.requested"]
    assert [(e["run_id"], e["actor"]["kind"]) for e in requested] == [(run_id, "agent")]


def test_a_bad_until_is_one_line_on_stderr_and_exit_2(
    enrolled: tuple[AgentHost, dict[str, str], Any, dict[str, str]],
) -> None:
    host, _, _, _ = enrolled
    result = run_agent("hold", "--state-dir", str(host.state_dir), "--until", "next week")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "nachtwacht agent hold: --until: 'next week' is not a date or time (YYYY-MM-DD, "
        "'YYYY-MM-DD HH:MM', HH:MM, or an instant with an offset such as …Z)"
    ]


@pytest.mark.skipif(not HOLD_OFFERED, reason=f"the control plane does not offer {HOLD_PATH} yet")
def test_hold_and_release_reach_the_agents_config(
    enrolled: tuple[AgentHost, dict[str, str], Any, dict[str, str]],
) -> None:
    host, agent, plane, _ = enrolled
    state = ("--state-dir", str(host.state_dir))
    # Within the control plane's 90-day bound on a hold.
    until = (datetime.now(UTC) + timedelta(days=10)).date().isoformat()
    held = run_agent("hold", *state, "--until", until, "--reason", "maintenance")
    assert held.returncode == 0, held.stderr
    assert f"held until {until} 00:00 Europe/Amsterdam" in held.stdout
    hold = _config_once(plane, agent, lambda c: c.get("hold") is not None)["hold"]
    assert hold["reason"] == "maintenance"
    assert hold["set_by"] == "agent"
    released = run_agent("release-hold", *state)
    assert released.returncode == 0, released.stderr
    assert _config_once(plane, agent, lambda c: c.get("hold") is None).get("hold") is None
