"""`nachtwacht agent uninstall [--purge]` after `install`: real processes, a stand-in control plane
on loopback, a recording `systemctl` first on PATH and a unit directory of the test's own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent_daemon.commands.enrollment_stand_in import stand_in_plane
from tests.agent_daemon.commands.install_support import FakeSystemd, install, uninstall
from tests.worlds.hosts import AgentHost

pytestmark = pytest.mark.slow


@pytest.fixture
def installed(tmp_path: Path) -> Iterator[tuple[AgentHost, FakeSystemd]]:
    host = AgentHost(tmp_path / "host")
    systemd = FakeSystemd(tmp_path / "systemd")
    with stand_in_plane() as plane:
        result = install(host, systemd, plane.url, plane.token())
        assert result.returncode == 0, result.stderr
    # The managed agent's builds: never removed by uninstall.
    build = host.install_root / "versions" / "1.0.0"
    build.mkdir(parents=True)
    (build / ".complete").write_text("sha256")
    systemd.log.unlink()
    yield host, systemd


def test_uninstall_stops_the_services_removes_its_units_and_keeps_config_and_builds(
    installed: tuple[AgentHost, FakeSystemd],
) -> None:
    host, systemd = installed
    result = uninstall(host, systemd, "--yes")
    assert result.returncode == 0, result.stderr
    assert systemd.calls() == [
        "disable --now nachtwacht-agent.service provibr-agent.service",
        "daemon-reload",
    ]
    assert list(systemd.unit_dir.iterdir()) == []
    assert (host.state_dir / "agent.toml").exists()
    assert (host.install_root / "versions" / "1.0.0" / ".complete").exists()
    assert f"the managed agent's builds under {host.install_root} are kept" in result.stdout
    assert "--purge removes them" in result.stdout

    again = uninstall(host, systemd, "--yes")
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("nothing left to uninstall; the config ")
    assert len(systemd.calls()) == 2


def test_purge_removes_config_and_state_and_a_second_run_finds_nothing(
    installed: tuple[AgentHost, FakeSystemd],
) -> None:
    host, systemd = installed
    result = uninstall(host, systemd, "--purge", "--yes")
    assert result.returncode == 0, result.stderr
    assert not host.state_dir.exists()
    assert (host.install_root / "versions" / "1.0.0").exists()
    again = uninstall(host, systemd, "--purge", "--yes")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "nothing left to uninstall"


def test_without_yes_and_without_a_terminal_nothing_is_removed(
    installed: tuple[AgentHost, FakeSystemd],
) -> None:
    host, systemd = installed
    result = uninstall(host, systemd, "--purge")
    assert result.returncode == 2
    assert result.stderr.strip().endswith(
        "--yes: not given, and there is no terminal to ask on — expected --yes"
    )
    assert len(list(systemd.unit_dir.iterdir())) == 2
    assert (host.state_dir / "agent.toml").exists()
    assert systemd.calls() == []


def test_a_unit_install_did_not_write_is_left_in_place(
    installed: tuple[AgentHost, FakeSystemd],
) -> None:
    host, systemd = installed
    own = systemd.unit_dir / "provibr-agent.service"
    own.write_text("[Service]\nExecStart=/srv/agent\n")
    result = uninstall(host, systemd, "--yes")
    assert result.returncode == 0, result.stderr
    assert own.exists()
    assert not (systemd.unit_dir / "nachtwacht-agent.service").exists()
    assert systemd.calls()[0] == "disable --now nachtwacht-agent.service"


def test_purge_leaves_a_folder_that_is_not_an_agents_state_alone(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    systemd = FakeSystemd(tmp_path / "systemd")
    host.state_dir.mkdir(parents=True)
    (host.state_dir / "notes.txt").write_text("someone else's")
    result = uninstall(host, systemd, "--purge", "--yes")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("nothing left to uninstall")
    assert (host.state_dir / "notes.txt").exists()
