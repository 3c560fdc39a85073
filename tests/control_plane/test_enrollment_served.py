"""Enrollment against `nachtwacht control serve` as a real process: a token made with the command
line is exchanged over HTTP for an agent that polls at once; its second use is refused."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from ground.contract import CONFIG_PATH, ENROLL_PATH
from tests.conftest import RunningControlPlane

pytestmark = pytest.mark.slow


def test_a_token_from_the_command_line_enrolls_one_host_of_a_served_control_plane(
    control_plane_server: Callable[..., RunningControlPlane],
) -> None:
    server = control_plane_server()
    org = server.create_org("Acme")
    made = server.admin(
        "enrollment-token", "create", "--org", org["org_id"], "--url", server.base_url
    )
    assert made["install_command"] == (
        f"nachtwacht agent install --url {server.base_url} --enrollment-token {made['secret']}"
        " --trusted-key release.pub"
    )
    with httpx.Client(base_url=server.base_url, timeout=30) as host:
        token = {"Authorization": f"Bearer {made['secret']}"}
        enrolled = host.post(ENROLL_PATH, json={"name": "web-01"}, headers=token)
        assert enrolled.status_code == 201, enrolled.text
        credential = enrolled.json()["credential"]
        config = host.get(CONFIG_PATH, headers={"Authorization": f"Bearer {credential}"})
        assert config.status_code == 200, config.text
        assert config.json()["agent_id"] == enrolled.json()["agent_id"]
        second = host.post(ENROLL_PATH, json={"name": "web-02"}, headers=token)
    assert second.status_code == 401
    assert second.json()["detail"]["code"] == "enrollment_token_used_up"
    (listed,) = server.admin("enrollment-token", "list")["tokens"]
    assert (listed["state"], listed["uses_left"]) == ("used_up", 0)
    trail = server.admin("events", "--kind", "enrollment_token.")["events"]
    assert sorted(event["kind"] for event in trail) == [
        "enrollment_token.created",
        "enrollment_token.refused",
        "enrollment_token.used",
    ]
