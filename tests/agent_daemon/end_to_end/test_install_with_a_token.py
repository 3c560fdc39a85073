"""`nachtwacht agent install` with an enrollment token against a real control plane (the embedded
PostgreSQL, loopback HTTP): the agent is enrolled, its daemon polls, and a single-use token's
second use is refused in one line; the install line the control plane prints for a token runs as
printed, the trust file it names put in place. `systemctl` is a recording stand-in first on
PATH; the daemon is started as the unit would start it."""

from __future__ import annotations

import shlex
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.agent_daemon.commands.install_support import FakeSystemd, install
from tests.agent_daemon.trust_roots.chain import RootChain
from tests.worlds.daemons import run_agent
from tests.worlds.hosts import AgentHost

pytestmark = pytest.mark.slow


def _new_token(plane: Any, org_id: str, *, uses: int) -> dict[str, Any]:
    operator = plane.create_operator_key()
    answer = httpx.post(
        f"{plane.base_url}/v1/admin/enrollment-tokens",
        json={"org_id": org_id, "uses": uses},
        headers={"Authorization": f"Bearer {operator}"},
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    shown: dict[str, Any] = answer.json()
    return shown


def _enrollment_token(plane: Any, org_id: str, *, uses: int) -> str:
    secret: str = _new_token(plane, org_id, uses=uses)["secret"]
    return secret


def test_install_with_a_token_enrolls_an_agent_that_polls_and_the_token_is_spent(
    control_plane_server: Callable[..., Any], tmp_path: Path
) -> None:
    plane = control_plane_server()
    org = plane.create_org("Acme")
    token = _enrollment_token(plane, org["org_id"], uses=1)
    host = AgentHost(tmp_path / "host")
    systemd = FakeSystemd(tmp_path / "systemd")

    result = install(host, systemd, plane.base_url, token)
    assert result.returncode == 0, result.stderr
    document = tomllib.loads((host.state_dir / "agent.toml").read_text())
    assert document["credential"].startswith("nwa_")
    assert systemd.calls()[-1] == "enable --now nachtwacht-agent.service"

    daemon = host.start()
    try:
        synced = daemon.wait_for("config.synced")
    finally:
        assert daemon.terminate() == 0, daemon.stderr()
    assert synced["schedule"] == ["03:00"]

    second = AgentHost(tmp_path / "second", keys_dir=host.keys_dir)
    again = install(second, systemd, plane.base_url, token, "--name", "web-02")
    assert again.returncode == 2
    [line] = again.stderr.strip().splitlines()
    assert line.startswith("nachtwacht agent install: --enrollment-token: ")
    assert "no use left" in line
    assert not (second.state_dir / "agent.toml").exists()


@pytest.mark.parametrize("published", [False, True], ids=["release_key", "trust_root"])
def test_the_printed_install_line_runs_once_its_trust_file_is_on_the_host(
    control_plane_server: Callable[..., Any], tmp_path: Path, published: bool
) -> None:
    plane = control_plane_server()
    org = plane.create_org("Acme")
    host = AgentHost(tmp_path / "host")
    systemd = FakeSystemd(tmp_path / "systemd")
    # What the provider hands the host's admin out of band: the newest root, or the release key.
    trust_file = host.public_key
    if published:
        chain = RootChain()
        chain.next()
        provider = tmp_path / "from-the-provider"
        provider.mkdir()
        for version in (1, 2):
            trust_file = provider / f"root-{version}.json"
            trust_file.write_bytes(chain.versions[version])
            plane.admin("trust-root", "publish", str(trust_file))
    printed = _new_token(plane, org["org_id"], uses=1)["install_command"]

    words = shlex.split(printed)
    assert words[:3] == ["nachtwacht", "agent", "install"]
    named = "root-2.json" if published else "release.pub"
    # The line as printed, the file it names given by its path on this host; then only this
    # test's own folders and seams.
    line = [str(trust_file) if word == named else word for word in words[2:]]
    result = run_agent(
        *line, "--state-dir", str(host.state_dir), "--name", "web-01",
        "--install-root", str(host.install_root), "--restart-command", "true",
        "--systemd-dir", str(systemd.unit_dir), env=systemd.env(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "enrolled agent web-01" in result.stdout
    assert named in words
    assert (host.state_dir / "agent.toml").exists()
    assert (host.state_dir / "trust_root.json").exists() == published
