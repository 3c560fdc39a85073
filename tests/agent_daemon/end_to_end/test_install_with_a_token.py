"""`nachtwacht agent install` with an enrollment token against a real control plane (the embedded
PostgreSQL, loopback HTTP): the agent is enrolled, its daemon polls, and a single-use token's
second use is refused in one line. `systemctl` is a recording stand-in first on PATH; the daemon
is started as the unit would start it."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.agent_daemon.commands.install_support import FakeSystemd, install
from tests.worlds.hosts import AgentHost

pytestmark = pytest.mark.slow


def _enrollment_token(plane: Any, org_id: str, *, uses: int) -> str:
    operator = plane.create_operator_key()
    answer = httpx.post(
        f"{plane.base_url}/v1/admin/enrollment-tokens",
        json={"org_id": org_id, "uses": uses},
        headers={"Authorization": f"Bearer {operator}"},
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    secret: str = answer.json()["secret"]
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
