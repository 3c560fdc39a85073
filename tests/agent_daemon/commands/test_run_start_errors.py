"""`nachtwacht agent run` that cannot start, as systemd and journald see it: every line on stderr
carries the error priority `<3>` (so `journalctl -p warning` shows it), and a configuration that
cannot work until someone changes it exits 78 (EX_CONFIG), which the unit does not restart; any
other failure to start keeps exit 2, which it does. Real processes, real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_daemon.commands.run_cli import EXIT_CONFIG_ERROR, EXIT_START_FAILED
from agent_daemon.disk.pid_lock import PidLock
from agent_daemon.settings import render_config, write_config
from tests.agent_daemon.network_support.servers import AGENT_ID
from tests.worlds.daemons import agent_environment, run_agent
from tests.worlds.hosts import AgentHost

pytestmark = pytest.mark.slow


def write_enrolled_config(host: AgentHost, **extra: object) -> Path:
    config = host.state_dir / "agent.toml"
    host.prepare()
    document: dict[str, object] = {
        "control_url": "https://control.example",
        "credential": "nwa_the_agents_credential",
        "agent_id": str(AGENT_ID),
        "trusted_keys": [str(host.public_key)],
        "install_root": str(host.install_root),
        "platform": "linux-x86_64",
        "channel": "stable",
        "restart_command": ["true"],
        "health_command": ["true"],
        **extra,
    }
    write_config(config, render_config(document))  # type: ignore[arg-type]
    return config


def error_lines(stderr: str) -> list[str]:
    lines = stderr.strip().splitlines()
    assert lines, "nothing on stderr"
    for line in lines:
        assert line.startswith("<3>nachtwacht agent run: "), stderr
    assert "Traceback" not in stderr
    return [line.removeprefix("<3>nachtwacht agent run: ") for line in lines]


def test_the_configuration_error_status_is_sysexits_ex_config() -> None:
    assert EXIT_CONFIG_ERROR == 78


def test_a_config_others_can_read_is_an_error_line_and_exit_78(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    config = write_enrolled_config(host)
    os.chmod(config, 0o644)
    result = run_agent("run", "--state-dir", str(host.state_dir))
    assert result.returncode == EXIT_CONFIG_ERROR
    (line,) = error_lines(result.stderr)
    assert line.startswith(f"{config}: mode 0644 lets other users read the agent's credential")


def test_every_unknown_field_is_its_own_error_line(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    config = write_enrolled_config(host, restart_comand=["true"], chanel="beta")
    result = run_agent("run", "--state-dir", str(host.state_dir))
    assert result.returncode == EXIT_CONFIG_ERROR
    assert sorted(error_lines(result.stderr)) == [
        f"{config}: chanel: unknown field (check the spelling)",
        f"{config}: restart_comand: unknown field (check the spelling)",
    ]


def test_plain_http_to_another_host_is_an_error_line_and_exit_78(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    write_enrolled_config(host, control_url="http://control.example")
    result = run_agent("run", "--state-dir", str(host.state_dir))
    assert result.returncode == EXIT_CONFIG_ERROR
    (line,) = error_lines(result.stderr)
    assert "control_url: 'http://control.example' is plain http" in line


def test_no_config_yet_is_a_configuration_error(tmp_path: Path) -> None:
    result = run_agent("run", "--state-dir", str(tmp_path / "nowhere"))
    assert result.returncode == EXIT_CONFIG_ERROR
    (line,) = error_lines(result.stderr)
    assert "run `nachtwacht agent enroll` first" in line


def test_a_bad_fake_clock_is_a_configuration_error(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    write_enrolled_config(host)
    env = agent_environment(NACHTWACHT_FAKE_CLOCK="not an instant")
    result = run_agent("run", "--state-dir", str(host.state_dir), env=env)
    assert result.returncode == EXIT_CONFIG_ERROR
    error_lines(result.stderr)


def test_another_daemon_on_the_state_directory_is_no_configuration_error(tmp_path: Path) -> None:
    # Once the other daemon stops, this one can start: systemd must keep trying.
    host = AgentHost(tmp_path / "host")
    write_enrolled_config(host)
    with PidLock(host.state_dir / "daemon.lock"):
        result = run_agent("run", "--state-dir", str(host.state_dir))
    assert result.returncode == EXIT_START_FAILED
    (line,) = error_lines(result.stderr)
    assert "another agent daemon" in line
