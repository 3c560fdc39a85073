"""`nachtwacht agent enroll | run | status` as a customer's admin runs them: real processes, a real
control plane on the embedded PostgreSQL, loopback HTTP."""

from __future__ import annotations

import json
import os
import stat
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_daemon.commands.agent_parts import OUTBOX_DIR_NAME
from agent_daemon.commands.run_cli import EXIT_CONFIG_ERROR
from agent_daemon.connection.outbox import Outbox, Report
from ground.contract import UNREACHABLE_PATH
from tests.worlds.daemons import agent_environment, run_agent
from tests.worlds.hosts import AgentHost

pytestmark = pytest.mark.slow


@pytest.fixture
def enrolled(
    control_plane_server: Callable[..., Any], tmp_path: Path
) -> tuple[AgentHost, dict[str, str], Any]:
    plane = control_plane_server()
    org = plane.create_org("Acme")
    agent = plane.enroll_agent(org["org_id"], "web-01")
    host = AgentHost(tmp_path / "host")
    result = host.enroll(plane.base_url, agent["agent_key"])
    assert result.returncode == 0, result.stderr
    return host, agent, plane


def test_enroll_writes_a_private_config_and_learns_the_agent_id(
    enrolled: tuple[AgentHost, dict[str, str], Any],
) -> None:
    host, agent, plane = enrolled
    config_file = host.state_dir / "agent.toml"
    assert stat.S_IMODE(os.stat(config_file).st_mode) == 0o600
    document = tomllib.loads(config_file.read_text())
    assert document["agent_id"] == agent["agent_id"]
    assert document["credential"] == agent["agent_key"]
    assert document["control_url"] == plane.base_url.rstrip("/")
    assert document["trusted_keys"] == [str(host.public_key)]
    # The default health check asks the running agent; `--version` would name the installed
    # build even while the old process runs, and a broken build would never be rolled back.
    entry = str(host.install_root / "current" / "bin" / "provibr-agent")
    assert document["health_command"] == [entry, "health"]
    assert (host.state_dir / "config-cache.json").exists()


def test_status_shows_schedule_next_slot_and_that_the_daemon_is_not_running(
    enrolled: tuple[AgentHost, dict[str, str], Any],
) -> None:
    host, _, _ = enrolled
    result = host.status()
    assert result.returncode == 0, result.stderr
    assert "daemon:        not running" in result.stdout
    assert "schedule:      on, 03:00 (Europe/Amsterdam)" in result.stdout
    assert "next slot:" in result.stdout
    assert "last runs:     none yet" in result.stdout
    as_json = json.loads(host.status("--json").stdout)
    assert as_json["daemon_running"] is False
    assert as_json["config"]["schedule"] == {"enabled": True, "times": ["03:00"]}


def test_status_names_an_unreachable_slots_report_waiting_in_the_outbox(
    enrolled: tuple[AgentHost, dict[str, str], Any],
) -> None:
    host, _, _ = enrolled
    Outbox(host.state_dir / OUTBOX_DIR_NAME).put(
        Report(
            method="POST",
            path=UNREACHABLE_PATH,
            body={"slot_key": "2026-11-30T03:00"},
            slot_key="2026-11-30T03:00",
        )
    )
    result = host.status()
    assert result.returncode == 0, result.stderr
    assert "outbox:        1 report(s) waiting to be delivered" in result.stdout
    assert (
        "2026-11-30 03:00 CET: the agent could not reach the control plane in its window, and the"
        " report saying so waits in the outbox"
    ) in result.stdout
    as_json = json.loads(host.status("--json").stdout)
    assert as_json["unreachable_reports_waiting"] == ["2026-11-30T03:00"]


def test_enroll_with_an_unknown_credential_is_one_clear_line(
    control_plane_server: Callable[..., Any], tmp_path: Path
) -> None:
    plane = control_plane_server()
    host = AgentHost(tmp_path / "host")
    result = host.enroll(plane.base_url, "nwa_not_a_real_credential_0000000000")
    assert result.returncode == 2
    assert "nachtwacht agent enroll: --credential: the control plane refused the credential" in (
        result.stderr
    )
    assert "ask your provider for a new one" in result.stderr
    assert "re-enroll" not in result.stderr, "enrolling is what the admin is doing"
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (host.state_dir / "agent.toml").exists()


def test_enroll_with_an_unreachable_control_plane_is_one_clear_line(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    result = host.enroll("http://127.0.0.1:9", "nwa_0123456789abcdef")
    assert result.returncode == 2
    assert "cannot connect" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (host.state_dir / "agent.toml").exists()


def test_enroll_refuses_to_replace_a_config_without_force(
    enrolled: tuple[AgentHost, dict[str, str], Any],
) -> None:
    host, agent, plane = enrolled
    again = host.enroll(plane.base_url, agent["agent_key"])
    assert again.returncode == 2
    assert "already exists (use --force" in again.stderr
    forced = host.enroll(plane.base_url, agent["agent_key"], "--force")
    assert forced.returncode == 0, forced.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            [
                "enroll",
                "--url",
                "ftp://x",
                "--credential",
                "nwa_0123456789",
                "--trusted-key",
                "KEY",
            ],
            "--url: found 'ftp://x'",
            id="bad_url",
        ),
        pytest.param(
            [
                "enroll",
                "--url",
                "http://127.0.0.1:9",
                "--credential",
                "secret",
                "--trusted-key",
                "KEY",
            ],
            "--credential: the value given (not shown) — expected an agent credential",
            id="not_an_agent_credential",
        ),
        pytest.param(["launch"], "invalid choice: 'launch'", id="unknown_command"),
        *(
            pytest.param(
                ["update-now", "--timeout-seconds", value],
                f"argument --timeout-seconds: found '{value}' — expected a number of seconds "
                "above 0",
                id=f"follow_for_{value}",
            )
            for value in ("nan", "-1", "0", "inf", "soon")
        ),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_it(
    tmp_path: Path, args: list[str], message: str
) -> None:
    host = AgentHost(tmp_path / "host")
    args = [str(host.public_key) if a == "KEY" else a for a in args]
    if args[0] in {"enroll", "update-now"}:
        args += ["--state-dir", str(host.state_dir)]
    result = run_agent(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_run_without_enrolment_says_to_enroll(tmp_path: Path) -> None:
    result = run_agent("run", "--state-dir", str(tmp_path / "nowhere"))
    assert result.returncode == EXIT_CONFIG_ERROR
    assert "run `nachtwacht agent enroll` first" in result.stderr


def test_state_directory_from_systemd_wins_over_the_flag(
    enrolled: tuple[AgentHost, dict[str, str], Any], tmp_path: Path
) -> None:
    host, _, _ = enrolled
    env = agent_environment(STATE_DIRECTORY=str(host.state_dir))
    result = run_agent("status", "--state-dir", str(tmp_path / "elsewhere"), env=env)
    assert result.returncode == 0, result.stderr
    assert "schedule:      on, 03:00" in result.stdout
