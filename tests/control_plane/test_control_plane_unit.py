"""The control plane's systemd unit: `systemctl stop` (and a kill) ends every worker of
`control serve`, and the service runs with nothing it does not need. What systemd does with the
settings is systemd's; here: that the unit says them, that systemd accepts it, and that the
syscall filter lets each worker ask for its parent-death signal."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from control_plane.config import DATA_DIR_ENV, RELEASE_KEYS_ENV
from control_plane.database import DATABASE_URL_ENV
from tests.conftest import REPO_ROOT

UNIT = REPO_ROOT / "packaging" / "systemd" / "nachtwacht-control-plane.service"
needs_systemd_analyze = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="needs systemd-analyze"
)


def _directives() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for raw in UNIT.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key, []).append(value)
    return found


def test_the_unit_runs_serve() -> None:
    (command,) = _directives()["ExecStart"]
    assert command.split()[:3] == ["/opt/nachtwacht/venv/bin/nachtwacht", "control", "serve"]


def test_stop_signals_the_supervisor_once_and_kills_whatever_is_left() -> None:
    unit = _directives()
    # mixed: SIGTERM to the supervisor alone (it forwards one to each worker; a second one would
    # cut uvicorn's graceful stop short), then SIGKILL to the whole control group.
    assert unit["KillMode"] == ["mixed"]
    assert unit["KillSignal"] == ["SIGTERM"]
    assert unit["SendSIGKILL"] == ["yes"]
    (timeout,) = unit["TimeoutStopSec"]
    assert timeout.endswith("s")
    assert 0 < int(timeout.removesuffix("s")) <= 90  # bounded: never infinity


def test_the_unit_runs_with_nothing_it_does_not_need() -> None:
    unit = _directives()
    for name, value in {
        "DynamicUser": "yes",
        "NoNewPrivileges": "yes",
        "CapabilityBoundingSet": "",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "PrivateDevices": "yes",
        "RestrictSUIDSGID": "yes",
        "SystemCallArchitectures": "native",
        "SystemCallFilter": "@system-service",
        "StateDirectory": "nachtwacht-control-plane",
    }.items():
        assert unit.get(name) == [value], name
    assert set(unit["RestrictAddressFamilies"][0].split()) == {"AF_UNIX", "AF_INET", "AF_INET6"}


def test_the_release_keys_it_names_are_where_the_services_own_user_can_read_them() -> None:
    # The user DynamicUser makes owns the state directory, never the configuration directory
    # (systemd chowns every kind but that one): `serve` reads files there only as "others". The
    # environment file, which holds the database password, is read by systemd itself.
    unit = _directives()
    (name,) = unit["ConfigurationDirectory"]
    (mode,) = unit["ConfigurationDirectoryMode"]
    private = int(mode, 8) & 0o005 != 0o005
    guide = (REPO_ROOT / "docs" / "control_plane.md").read_text()
    named = re.findall(rf"{RELEASE_KEYS_ENV}=([^\s'\"]+)", UNIT.read_text() + guide)
    assert named
    unreadable = [p for p in named if private and p.startswith(f"/etc/{name}/")]
    assert unreadable == []


def test_the_unit_names_the_settings_serve_reads() -> None:
    text = UNIT.read_text()
    assert f"Environment={DATA_DIR_ENV}=%S/nachtwacht-control-plane/" in text
    assert f"{DATABASE_URL_ENV}=" in text
    assert f"{RELEASE_KEYS_ENV}=" in text


@needs_systemd_analyze
def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    # The executable exists only on a real host: point ExecStart at one that exists here.
    lines = [
        "ExecStart=/bin/true" if line.startswith("ExecStart=") else line
        for line in UNIT.read_text().splitlines()
    ]
    copy = tmp_path / UNIT.name
    copy.write_text("\n".join(lines) + "\n")
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(copy)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == ""


@needs_systemd_analyze
def test_the_syscall_filter_lets_a_worker_ask_for_its_parent_death_signal() -> None:
    result = subprocess.run(
        ["systemd-analyze", "syscall-filter", "@process"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "prctl" in result.stdout.split()
    listed = subprocess.run(
        ["systemd-analyze", "syscall-filter", "@system-service"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "@process" in listed.stdout.split()
