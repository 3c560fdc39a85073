"""The README's agent section works when copied.

The block under "The agent, on a customer's host" is run command by command, as written, against a
real control plane with a real enrollment token. Only the absolute roots differ: `/etc`,
`/var/lib` and `/opt` become folders of a temporary root, and the commands get the variables the
installed unit gives its service (`STATE_DIRECTORY`, `CONFIGURATION_DIRECTORY`, read from the unit
file `agent install` wrote). `systemctl` is a recording stand-in first on PATH; what `systemctl
enable --now` would do — create the unit's directories and start its `ExecStart` with that
environment — the test does, and the daemon must then find the config `install` wrote. The
package's own install (`apt install ./….deb`) is skipped here: tests/packaging installs it into a
throwaway root with no network. The unit's own paths are checked against root's defaults
separately (`test_as_root_without_paths_the_agent_uses_the_units_directories`).
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

import httpx
import pytest

from agent_daemon.settings import resolve_paths
from tests.agent_daemon.commands.install_support import FakeSystemd
from tests.agent_daemon.trust_roots.chain import RootChain
from tests.worlds.daemons import DaemonProcess
from tests.worlds.processes import REPO_ROOT, child_environment

pytestmark = pytest.mark.slow

README = REPO_ROOT / "README.md"
UNIT = REPO_ROOT / "packaging" / "systemd" / "nachtwacht-agent.service"
SKIPPED = (("apt install ./nachtwacht-agent_", "tests/packaging installs the package itself"),)


def readme_commands() -> list[str]:
    text = README.read_text()
    section = text[text.index("### The agent, on a customer's host") :]
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


def test_as_root_without_paths_the_agent_uses_the_units_directories() -> None:
    """The README's install names no paths: as root it must write where the unit reads."""
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
    operator = plane.create_operator_key()
    made = httpx.post(
        f"{plane.base_url}/v1/admin/enrollment-tokens",
        json={"org_id": org["org_id"], "uses": 1},
        headers={"Authorization": f"Bearer {operator}"},
        timeout=30,
    )
    assert made.status_code == 201, made.text

    root = tmp_path / "root"
    for existing in ("etc/systemd/system", "var/lib", "opt"):  # what any systemd host has
        (root / existing).mkdir(parents=True)
    admin = tmp_path / "admin"  # the admin's working directory: the token and the trust root
    admin.mkdir()
    (admin / "token.txt").write_text(made.json()["secret"] + "\n")
    (admin / "root-1.json").write_bytes(RootChain().versions[1])
    systemd = FakeSystemd(tmp_path / "systemd")

    nachtwacht = shlex.join([sys.executable, "-m", "nachtwacht.cli"])

    def substituted(command: str) -> str:
        for program in (
            "/opt/nachtwacht/current/venv/bin/python -m nachtwacht",
            "/opt/nachtwacht/venv/bin/nachtwacht",
            "nachtwacht",
        ):
            if command.startswith(program + " "):
                command = nachtwacht + command[len(program) :]
                break
        command = command.replace("https://control.example", plane.base_url.rstrip("/"))
        for absolute in ("/etc/", "/var/lib/", "/opt/"):
            command = re.sub(rf"(?<![\w./]){re.escape(absolute)}", f"{root}{absolute}", command)
        return command

    # Root's defaults that are not the unit's directories, moved under the temporary root.
    moved = {
        "--install-root": str(root / "opt/provibr-agent"),
        "--systemd-dir": str(root / "etc/systemd/system"),
    }
    environment = unit_environment(unit_service(UNIT), root)
    outputs: dict[str, str] = {}
    for command in readme_commands():
        if command.startswith("#") or any(command.startswith(s) for s, _ in SKIPPED):
            continue
        run = substituted(command)
        if " agent install " in run:
            extra = " ".join(f"{flag} {shlex.quote(value)}" for flag, value in moved.items())
            run = run.replace(" agent install ", f" agent install {extra} ", 1)
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", run],
            env=child_environment({**environment, **systemd.env()}),
            cwd=admin,
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
        outputs[command.split(" --")[0]] = result.stdout

    assert "enable --now nachtwacht-agent.service" in systemd.calls()
    config = root / "etc/nachtwacht-agent/agent.toml"
    assert config.stat().st_mode & 0o777 == 0o600
    assert (root / "var/lib/nachtwacht-agent/config-cache.json").exists()
    status = outputs["nachtwacht agent status"]
    assert "schedule:      on, 03:00 (Europe/Amsterdam)" in status
    agent_id = status.split("agent:", 1)[1].split()[0]

    # What `systemctl enable --now` does, from the unit `install` wrote.
    service = unit_service(root / "etc/systemd/system/nachtwacht-agent.service")
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
        # Logged once the config is loaded: the daemon found what `install` wrote.
        starting = daemon.wait_for("daemon.starting")
        daemon.wait_for("daemon.ready")
    finally:
        assert daemon.terminate() == 0, daemon.stderr()
    assert starting["agent_id"] == agent_id
    assert starting["state_dir"] == unit_env["STATE_DIRECTORY"]
    assert starting["install_root"] == str(root / "opt/provibr-agent")
