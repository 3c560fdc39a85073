"""The README's agent section works when copied.

The block under "The agent, under systemd" is run command by command, as written, against a real
control plane. Only the absolute roots differ: `/etc`, `/var/lib` and `/opt` become folders of a
temporary root, and the commands get the variables the installed unit gives its service
(`STATE_DIRECTORY`, `CONFIGURATION_DIRECTORY`, read from the unit file the README installed).
`systemctl enable --now` becomes what systemd would do: create the unit's directories and start its
`ExecStart` with that environment; the daemon must then find the config `enroll` wrote. Steps that
need the network or systemd itself (creating the venv, `pip install`, `daemon-reload`) are named
and skipped. The unit's own paths are checked against root's defaults separately
(`test_as_root_without_paths_enroll_uses_the_units_directories`).
"""

from __future__ import annotations

import configparser
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_daemon.settings import resolve_paths
from signed_release.keys import generate_key_files
from tests.worlds.daemons import DaemonProcess
from tests.worlds.processes import REPO_ROOT, child_environment

pytestmark = pytest.mark.slow

README = REPO_ROOT / "README.md"
UNIT = REPO_ROOT / "packaging" / "systemd" / "nachtwacht-agent.service"
VENV = "/opt/nachtwacht/venv"
SKIPPED = (
    ("python3 -m venv", "the test runs this checkout's interpreter"),
    (f"{VENV}/bin/pip install", "no package index here; this checkout is installed"),
    ("systemctl daemon-reload", "no systemd here"),
)


def readme_commands() -> list[str]:
    text = README.read_text()
    section = text[text.index("### The agent, under systemd") :]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the agent section has no ```sh block"
    joined = block.group(1).replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip()]


def unit_service(path: Path) -> dict[str, str]:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read_string(path.read_text())
    return dict(parser["Service"])


def unit_environment(service: dict[str, str], root: Path) -> dict[str, str]:
    """What systemd sets for `StateDirectory=` and `ConfigurationDirectory=`, under `root`."""
    return {
        "STATE_DIRECTORY": str(root / "var/lib" / service["StateDirectory"]),
        "CONFIGURATION_DIRECTORY": str(root / "etc" / service["ConfigurationDirectory"]),
    }


def test_as_root_without_paths_enroll_uses_the_units_directories() -> None:
    """The README's enroll names no paths: as root it must write where the unit reads."""
    service = unit_service(UNIT)
    paths = resolve_paths(state_dir=None, config_file=None, environ={}, euid=0)
    assert paths.state_dir == Path("/var/lib") / service["StateDirectory"]
    assert paths.config_file == Path("/etc") / service["ConfigurationDirectory"] / "agent.toml"
    # …while a named state directory keeps its config beside it (tests, the demo's fleet).
    named = resolve_paths(state_dir="/srv/agent", config_file=None, environ={}, euid=0)
    assert named.config_file == Path("/srv/agent/agent.toml")
    user = resolve_paths(state_dir=None, config_file=None, environ={}, euid=1000)
    assert user.state_dir != Path("/var/lib") / service["StateDirectory"]


def test_the_readme_agent_section_runs_as_written(
    control_plane_server: Callable[..., Any], tmp_path: Path
) -> None:
    plane = control_plane_server()
    org = plane.create_org("Acme")
    agent = plane.enroll_agent(org["org_id"], "web-01")

    root = tmp_path / "root"
    for existing in ("etc/systemd/system", "var/lib", "opt"):  # what any systemd host has
        (root / existing).mkdir(parents=True)
    admin = tmp_path / "admin"  # the admin's working directory: a release of nachtwacht
    admin.mkdir()
    (admin / "packaging").symlink_to(REPO_ROOT / "packaging")
    (admin / "credential.txt").write_text(agent["agent_key"] + "\n")
    generate_key_files(tmp_path / "keys")
    (admin / "release.pub").write_bytes((tmp_path / "keys" / "release.pub").read_bytes())

    nachtwacht = shlex.join([sys.executable, "-m", "nachtwacht.cli"])

    def substituted(command: str) -> str:
        command = command.replace(f"{VENV}/bin/nachtwacht", nachtwacht)
        command = command.replace("https://control.example", plane.base_url.rstrip("/"))
        for absolute in ("/etc/", "/var/lib/", "/opt/"):
            command = re.sub(rf"(?<![\w./]){re.escape(absolute)}", f"{root}{absolute}", command)
        return command

    environment: dict[str, str] | None = None
    outputs: dict[str, str] = {}
    started = False
    for command in readme_commands():
        if command.startswith("#") or any(command.startswith(s) for s, _ in SKIPPED):
            continue
        if environment is None:
            # Before the unit file is installed its variables are known from the shipped copy.
            environment = unit_environment(unit_service(UNIT), root)
        if command.startswith("systemctl enable --now nachtwacht-agent.service"):
            started = True
            installed = root / "etc/systemd/system/nachtwacht-agent.service"
            service = unit_service(installed)  # the copy the README's `install` put there
            unit_env = unit_environment(service, root)
            for folder in unit_env.values():
                Path(folder).mkdir(parents=True, exist_ok=True, mode=0o700)
            exec_start = shlex.split(substituted(service["ExecStart"]))
            assert exec_start[-2:] == ["agent", "run"], service["ExecStart"]
            stderr_path = tmp_path / "daemon.stderr"
            with stderr_path.open("wb") as stderr:
                process = subprocess.Popen(
                    exec_start,
                    env=child_environment(unit_env),
                    cwd="/",
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    stdin=subprocess.DEVNULL,
                )
            daemon = DaemonProcess(process=process, stderr_path=stderr_path)
            try:
                # Logged once the config is loaded: the daemon found what `enroll` wrote.
                starting = daemon.wait_for("daemon.starting")
                daemon.wait_for("daemon.ready")
            finally:
                assert daemon.terminate() == 0, daemon.stderr()
            assert starting["agent_id"] == agent["agent_id"]
            assert starting["state_dir"] == unit_env["STATE_DIRECTORY"]
            assert starting["install_root"] == str(root / "opt/provibr-agent")
            continue
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", substituted(command)],
            env=child_environment(environment),
            cwd=admin,
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
        outputs[command.split(" --")[0]] = result.stdout

    assert started, "the README no longer starts the unit"
    config = root / "etc/nachtwacht-agent/agent.toml"
    assert config.stat().st_mode & 0o777 == 0o600
    assert (root / "var/lib/nachtwacht-agent/config-cache.json").exists()
    status = outputs[f"{VENV}/bin/nachtwacht agent status"]
    assert f"agent:         {agent['agent_id']}" in status
    assert "schedule:      on, 03:00 (Europe/Amsterdam)" in status
