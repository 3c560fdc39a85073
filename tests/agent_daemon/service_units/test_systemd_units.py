"""The systemd units in packaging/: valid for systemd, and holding the directives the updater's
design depends on."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

UNITS = Path(__file__).resolve().parents[3] / "packaging/systemd"


def directives(unit: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for raw in unit.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key, []).append(value)
    return found


def test_the_updater_unit_is_a_notify_service_with_a_watchdog_that_always_restarts() -> None:
    unit = directives(UNITS / "nachtwacht-agent.service")
    assert unit["Type"] == ["notify"]
    assert unit["WatchdogSec"]
    assert unit["Restart"] == ["always"]
    assert unit["StateDirectory"] == ["nachtwacht-agent"]
    assert unit["ExecStart"][0].endswith("nachtwacht agent run")


def test_the_updater_unit_is_read_only_except_its_own_dirs_and_the_install_root() -> None:
    unit = directives(UNITS / "nachtwacht-agent.service")
    assert unit["ProtectSystem"] == ["strict"]
    # The updater's own builds too ("-": a pip install has none).
    assert unit["ReadWritePaths"] == ["/opt/provibr-agent -/opt/nachtwacht"]
    # systemctl restart talks to systemd over a unix socket.
    assert "AF_UNIX" in unit["RestrictAddressFamilies"][0].split()


def test_the_updater_runs_its_current_build_after_the_guard() -> None:
    unit = directives(UNITS / "nachtwacht-agent.service")
    # `python -m`: a build's venv is renamed after it was made, its console scripts are not.
    assert unit["ExecStart"] == ["/opt/nachtwacht/current/venv/bin/python -m nachtwacht agent run"]
    # "-": a guard that fails never keeps the updater from starting.
    assert unit["ExecStartPre"] == ["-/usr/lib/nachtwacht-agent/guard.sh pre-start"]
    assert "nachtwacht-agent-guard.timer" in unit["Wants"]
    guard = directives(UNITS / "nachtwacht-agent-guard.service")
    assert guard["ExecStart"] == ["/usr/lib/nachtwacht-agent/guard.sh check"]
    assert guard["Type"] == ["oneshot"]
    timer = directives(UNITS / "nachtwacht-agent-guard.timer")
    assert timer["OnUnitActiveSec"] == ["1min"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_systemd_accepts_the_guards_timer_and_service(tmp_path: Path) -> None:
    for name in ("nachtwacht-agent-guard.service", "nachtwacht-agent-guard.timer"):
        text = (UNITS / name).read_text()
        lines = [
            "ExecStart=/bin/true" if line.startswith("ExecStart=") else line
            for line in text.splitlines()
        ]
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(tmp_path / "nachtwacht-agent-guard.timer")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == ""


def test_a_configuration_error_at_start_stops_the_restart_loop() -> None:
    # The daemon exits 78 (EX_CONFIG) when its configuration is unusable; restarting it every ten
    # seconds would only repeat the error until someone fixes the file.
    unit = directives(UNITS / "nachtwacht-agent.service")
    assert unit["RestartPreventExitStatus"] == ["78"]


def test_the_agent_unit_runs_the_current_build_and_keeps_a_heartbeat_directory() -> None:
    unit = directives(UNITS / "provibr-agent.service")
    assert unit["ExecStart"] == ["/opt/provibr-agent/current/bin/provibr-agent run"]
    assert unit["Restart"] == ["always"]
    assert unit["RuntimeDirectory"] == ["provibr-agent"]


def test_the_agent_runs_as_a_fixed_system_user_the_updater_can_name() -> None:
    # The updater runs each build's self-test and health command as `agent_user`; a user made up
    # at each start (DynamicUser) has no name it could be given, so the build would run as root.
    unit = directives(UNITS / "provibr-agent.service")
    assert "DynamicUser" not in unit
    assert unit["User"] == ["provibr-agent"]
    sysusers = (UNITS.parent / "sysusers.d/provibr-agent.conf").read_text().splitlines()
    assert [line.split()[:2] for line in sysusers if line.startswith("u ")] == [
        ["u", "provibr-agent"]
    ]


def documented_drop_in(unit: Path) -> str:
    """The drop-in a unit's comments give for another install root, as a file's text."""
    lines = unit.read_text().splitlines()
    start = lines.index("#   [Service]")
    block = []
    for line in lines[start:]:
        if not line.startswith("#   "):
            break
        block.append(line.removeprefix("#   "))
    return "\n".join(block) + "\n"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_the_drop_in_for_another_install_root_replaces_the_writable_path(tmp_path: Path) -> None:
    name = "nachtwacht-agent.service"
    drop_in = documented_drop_in(UNITS / name)
    assert drop_in == (
        "[Service]\nReadWritePaths=\nReadWritePaths=/srv/provibr-agent -/opt/nachtwacht\n"
    )
    text = (UNITS / name).read_text()
    lines = [
        "ExecStart=/bin/true" if line.startswith("ExecStart=") else line
        for line in text.splitlines()
    ]
    (tmp_path / name).write_text("\n".join(lines) + "\n")
    (tmp_path / f"{name}.d").mkdir()
    (tmp_path / f"{name}.d" / "install-root.conf").write_text(drop_in)
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(tmp_path / name)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == ""


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
@pytest.mark.parametrize("name", ["nachtwacht-agent.service", "provibr-agent.service"])
def test_systemd_accepts_the_unit(tmp_path: Path, name: str) -> None:
    # The executables exist only on a real host: point ExecStart at one that exists here.
    text = (UNITS / name).read_text()
    lines = [
        "ExecStart=/bin/true" if line.startswith("ExecStart=") else line
        for line in text.splitlines()
    ]
    (tmp_path / name).write_text("\n".join(lines) + "\n")
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(tmp_path / name)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == ""
