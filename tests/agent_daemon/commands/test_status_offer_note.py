"""`nachtwacht agent status` says why the agent is not updated to its pair's newest release, each
reason set by an operator's `nachtwacht control` command: real processes, a real control plane,
loopback HTTP. Each reason is read by a newly enrolled agent (its first config answer)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from signed_release.keys import generate_key_files, load_private_key
from tests.control_plane.conftest import sign_release
from tests.worlds.hosts import AgentHost

pytestmark = pytest.mark.slow


class Fleet:
    """One control plane with 1.0.0 (everyone) and 1.2.0 (its canary stage, reaching only
    marked canaries), and a new host enrolled for each question."""

    def __init__(self, plane: Any, root: Path) -> None:
        self.plane = plane
        self.root = root
        private, public, _ = generate_key_files(root / "release-keys")
        self.releases: dict[str, str] = {}
        for version, manifest_version in (("1.0.0", 10), ("1.2.0", 12)):
            signed = sign_release(
                load_private_key(private), version=version, manifest_version=manifest_version
            )
            paths = []
            for name, content in (
                ("manifest", signed.manifest),
                ("signature", signed.signature),
                ("artifact", signed.artifact),
            ):
                path = root / f"{version}.{name}"
                path.write_bytes(content)
                paths.append(str(path))
            published = plane.admin("publish-release", *paths, "--release-public-key", str(public))
            self.releases[version] = published["release_id"]
        operator = plane.create_operator_key()
        with httpx.Client(
            base_url=plane.base_url, headers={"Authorization": f"Bearer {operator}"}
        ) as client:
            answer = client.patch("/v1/admin/rollout/settings", json={"canary_share_percent": 0})
        assert answer.status_code == 200, answer.text

    def new_agent(self, name: str, *, pin: str | None = None) -> AgentHost:
        """A host enrolled as a new agent of a new organisation (pinned to `pin` first)."""
        org = self.plane.create_org(name)
        if pin is not None:
            self.plane.admin("pin", "--org", org["org_id"], "--version", pin, "--reason", "freeze")
        agent = self.plane.enroll_agent(org["org_id"], "web-01")
        host = AgentHost(self.root / name)
        enrolled = host.enroll(self.plane.base_url, agent["agent_key"])
        assert enrolled.returncode == 0, enrolled.stderr
        return host

    def status_of(self, host: AgentHost) -> tuple[str, dict[str, Any]]:
        text = host.status()
        assert text.returncode == 0, text.stderr
        document = json.loads(host.status("--json").stdout)
        return text.stdout, document


@pytest.fixture
def fleet(control_plane_server: Callable[..., Any], tmp_path: Path) -> Fleet:
    return Fleet(control_plane_server(), tmp_path)


def test_status_names_each_reason_the_newest_release_is_not_installed(fleet: Fleet) -> None:
    newest = fleet.releases["1.2.0"]

    waiting = fleet.new_agent("Waiting")
    text, document = fleet.status_of(waiting)
    stage = "not updated to 1.2.0: the new release has not reached this agent in its rollout yet"
    assert f"newest:        {stage}" in text
    assert document["newest_release_note"] == stage
    assert document["config"]["offer_note"] == {
        "reason": "wave",
        "newest_version": "1.2.0",
        "detail": None,
    }

    text, _ = fleet.status_of(fleet.new_agent("Pinned", pin="1.0.0"))
    assert "release:       1.0.0" in text
    assert "newest:        not updated to 1.2.0: pinned to another version by our operators" in text

    fleet.plane.admin("promote", newest, "--reason", "canaries fine")
    fleet.plane.admin("halt", newest, "--reason", "disk fills")
    halted = fleet.new_agent("Halted")
    text, _ = fleet.status_of(halted)
    assert (
        "newest:        not updated to 1.2.0: its rollout is halted (by our operators, or"
        " automatically after too many failed updates) (disk fills)"
    ) in text

    fleet.plane.admin("resume", newest, "--reason", "fixed")
    fleet.plane.admin("brake", "engage", "--release", newest, "--reason", "one bad build")
    braked = fleet.new_agent("Braked")
    text, _ = fleet.status_of(braked)
    assert (
        "newest:        not updated to 1.2.0: its rollout is paused by our operators"
        " (one bad build)"
    ) in text

    fleet.plane.admin("brake", "release", "--release", newest)
    free = fleet.new_agent("Free")
    text, document = fleet.status_of(free)
    assert "newest:" not in text
    assert document["newest_release_note"] is None
    assert document["config"]["offer_note"] is None
