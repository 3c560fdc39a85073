"""`nachtwacht agent uninstall [--purge]` after `install`: real processes, a stand-in control plane
on loopback, a recording `systemctl` first on PATH and a unit directory of the test's own."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_daemon.commands.unit_files import UNIT_NAMES, WRITTEN_BY_BUNDLE, shipped_unit
from agent_daemon.disk.pid_lock import PidLock
from tests.agent_daemon.commands.enrollment_stand_in import stand_in_plane
from tests.agent_daemon.commands.install_support import FakeSystemd, install, uninstall
from tests.agent_daemon.limited_child import at_most_memory
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


@pytest.mark.parametrize("units", ["installed", "none"])
def test_purge_refuses_while_a_daemon_holds_the_state_directory(
    installed: tuple[AgentHost, FakeSystemd], units: str
) -> None:
    # A daemon started by hand (`nachtwacht agent run`), or one systemctl did not stop: purging
    # under it would leave it updating with its credential and writing its state again.
    host, systemd = installed
    if units == "none":
        for unit in systemd.unit_dir.iterdir():
            unit.unlink()
    with PidLock(host.state_dir / "daemon.lock"):
        result = uninstall(host, systemd, "--purge", "--yes")
    assert result.returncode == 2
    assert result.stderr == (
        f"nachtwacht agent uninstall: --purge: a daemon still runs on {host.state_dir} "
        f"(pid {os.getpid()}) — expected none: it would go on with the credential it holds; "
        "stop it first (systemctl stop nachtwacht-agent.service, or end the `nachtwacht agent "
        "run` started by hand); nothing was removed\n"
    )
    assert (host.state_dir / "agent.toml").exists()
    assert len(list(systemd.unit_dir.iterdir())) == (2 if units == "installed" else 0)

    stopped = uninstall(host, systemd, "--purge", "--yes")
    assert stopped.returncode == 0, stopped.stderr
    assert not host.state_dir.exists()


def test_the_bundles_units_stay_and_the_admin_is_told_where_they_came_from(
    installed: tuple[AgentHost, FakeSystemd],
) -> None:
    host, systemd = installed
    for name in UNIT_NAMES:
        (systemd.unit_dir / name).write_bytes(WRITTEN_BY_BUNDLE + shipped_unit(name))
    result = uninstall(host, systemd, "--yes")
    assert result.returncode == 0, result.stderr
    # The recording systemctl says the daemon's unit is enabled: it is stopped, its file kept.
    assert systemd.calls()[-1] == "disable --now nachtwacht-agent.service"
    assert sorted(path.name for path in systemd.unit_dir.iterdir()) == sorted(UNIT_NAMES)
    assert "came with the offline bundle's install.sh" in result.stdout
    assert "apt remove" not in result.stdout


def test_purge_refuses_a_state_directory_that_is_a_link_before_changing_anything(
    installed: tuple[AgentHost, FakeSystemd], tmp_path: Path
) -> None:
    # An admin moved the state elsewhere and left a link: which to remove — the link, the folder
    # it points at, or both — is theirs to say. Nothing is stopped or removed half-way.
    host, systemd = installed
    elsewhere = tmp_path / "data" / "state"
    elsewhere.parent.mkdir()
    host.state_dir.rename(elsewhere)
    host.state_dir.symlink_to(elsewhere, target_is_directory=True)
    before = sorted(str(path) for path in tmp_path.rglob("*"))
    result = uninstall(host, systemd, "--purge", "--yes")
    assert result.returncode == 2
    assert result.stderr == (
        f"nachtwacht agent uninstall: --state-dir: {host.state_dir} is a symbolic link to "
        f"{elsewhere} — expected the folder itself (name it: --state-dir {elsewhere}); nothing "
        "was removed\n"
    )
    assert sorted(str(path) for path in tmp_path.rglob("*")) == before
    assert systemd.calls() == []


def test_purge_removes_links_in_the_state_directory_never_what_they_point_at(
    installed: tuple[AgentHost, FakeSystemd], tmp_path: Path
) -> None:
    # The non-root daemon's user owns the state directory; root purges it.
    host, systemd = installed
    outside = tmp_path / "outside"
    (outside / "folder").mkdir(parents=True)
    (outside / "precious").write_text("root's")
    (outside / "folder" / "kept").write_text("root's too")
    (host.state_dir / "a-file").symlink_to(outside / "precious")
    (host.state_dir / "a-folder").symlink_to(outside / "folder", target_is_directory=True)
    (host.state_dir / "outbox").mkdir(exist_ok=True)
    (host.state_dir / "outbox" / "000001.json").symlink_to(outside / "folder")
    before = {str(path): path.read_bytes() for path in outside.rglob("*") if path.is_file()}
    result = uninstall(host, systemd, "--purge", "--yes")
    assert result.returncode == 0, result.stderr
    assert not os.path.lexists(host.state_dir)
    assert {str(path): path.read_bytes() for path in outside.rglob("*") if path.is_file()} == before


def test_a_config_that_is_a_named_pipe_does_not_hold_uninstall(
    installed: tuple[AgentHost, FakeSystemd],
) -> None:
    host, systemd = installed
    config = host.state_dir / "agent.toml"
    config.unlink()
    os.mkfifo(config, 0o600)
    result = subprocess.run(
        [sys.executable, "-m", "nachtwacht", "agent", "uninstall", "--state-dir",
         str(host.state_dir), "--systemd-dir", str(systemd.unit_dir), "--purge", "--yes"],
        env=systemd.env(), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert not os.path.lexists(host.state_dir)


def test_a_config_grown_huge_is_not_read_whole(installed: tuple[AgentHost, FakeSystemd]) -> None:
    """A 2 GiB config (sparse: no disk) in a process that may hold at most 1 GiB: uninstall
    goes on without reading it, as with any config it cannot use."""
    host, systemd = installed
    config = host.state_dir / "agent.toml"
    with config.open("ab") as opened:
        opened.truncate(2 * 1024**3)
    result = subprocess.run(
        [sys.executable, "-m", "nachtwacht", "agent", "uninstall", "--state-dir",
         str(host.state_dir), "--systemd-dir", str(systemd.unit_dir), "--purge", "--yes"],
        env=systemd.env(), capture_output=True, text=True, timeout=60, check=False,
        preexec_fn=at_most_memory(1024**3),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert not os.path.lexists(host.state_dir)
