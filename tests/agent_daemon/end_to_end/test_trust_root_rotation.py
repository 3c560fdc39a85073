"""A release key rotated and revoked without touching a host, end to end: real daemons, a real
control plane on the embedded PostgreSQL, real signed builds, one fast fake clock.

The operators publish trust root v2 naming release key B instead of A. At the next slot every host
— one enrolled with root v1, one still on its trusted-key file for A — follows the chain to v2
(the second through the migration at v1, which A signed too) and installs the release signed by
B; a release signed by A is refused from then on (the control plane will not publish it; the
hosts would not install it). Nobody edits a file on a host.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from nachtwacht.demo_world.errors import WorldError
from nachtwacht.demo_world.release_tooling import sign_build
from signed_release.keys import load_private_key
from tests.agent_daemon.daemon_support.night import Night, NightClock, local
from tests.agent_daemon.trust_roots.chain import RootChain

pytestmark = pytest.mark.slow

SLOT = "2026-11-30T03:00"
LATER_SLOT = "2026-11-30T03:20"


@pytest.fixture
def night(tmp_path: Path, control_plane_server: Callable[..., Any]) -> Iterator[Night]:
    # Held at 02:57 while the builds and the hosts are set up.
    clock = NightClock.held(local("2026-11-30T02:57"), begins=tmp_path / "clock", speed=60.0)
    scenario = Night(
        root=tmp_path / "night",
        clock=clock,
        start_control_plane=control_plane_server,
        second_release_key=True,
    )
    yield scenario
    scenario.close()


def _publish_root(night: Night, body: bytes) -> None:
    answer = night.operator.post(
        "/v1/admin/trust-roots", content=body, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 201, answer.text


def _roots_held(night: Night, *, until: str, holding: dict[int, int]) -> dict[str, Any]:
    """The operators' list of roots once it counts `holding` (version → agents), read each
    product minute until `until`."""
    deadline = local(until)
    while True:
        answer = night.operator.get("/v1/admin/trust-roots")
        assert answer.status_code == 200, answer.text
        listed: dict[str, Any] = answer.json()
        held = {root["version"]: root["agents_holding"] for root in listed["roots"]}
        if all(held.get(v) == n for v, n in holding.items()) or night.clock.now() >= deadline:
            assert {v: held.get(v) for v in holding} == holding, listed
            return listed
        night.clock.wait_until(night.clock.now() + timedelta(minutes=1))


def test_a_rotated_release_key_reaches_every_host_through_the_control_plane(night: Night) -> None:
    key_a = load_private_key(night.keys_dir / "release.key")
    key_b = load_private_key(night.keys_dir_b / "release.key")
    # v1 names A; A signed it too, so a host on A's key file accepts it.
    chain = RootChain(release_key=key_a, migration_key=key_a)
    _publish_root(night, chain.versions[1])
    root_file = night.root / "root-v1.json"
    root_file.write_bytes(chain.versions[1])
    rooted = night.add_host("web-01", enroll_args=("--trust-root", str(root_file)))
    on_key_file = night.add_host("web-02")
    hosts = (rooted, on_key_file)
    for host in hosts:
        night.set_schedule(host, ["03:00", "03:20"])

    # The operators rotate: v2 names B only (signed offline by the root keys).
    _publish_root(night, chain.next(release_keys=[key_b]))
    night.publish("1.5.0", 50, keys_dir=night.keys_dir_b)
    signed_by_a = sign_build(
        version="1.6.0",
        manifest_version=60,
        keys_dir=night.keys_dir,
        workdir=night.root,
        clock_setting=night.clock.setting,
        launcher=night.plane.launcher,
    )

    daemons = [host.start() for host in hosts]
    for host, daemon in zip(hosts, daemons, strict=True):
        done = daemon.wait_for("update.succeeded", slot_key=SLOT)
        assert done["version"] == "1.5.0"
        daemon.wait_for("report.delivered", run_id=done["run_id"])
        assert host.current_version() == host.running_version() == "1.5.0"
    assert [e["version"] for e in daemons[0].named("trust_root.updated")] == [2]
    # The host on A's key file moved to v1 (A signed it), then to v2.
    assert [e["version"] for e in daemons[1].named("trust_root.updated")] == [1, 2]
    # Each told the control plane the root it holds, with its next poll.
    listed = _roots_held(night, until="2026-11-30T03:15", holding={2: 2})
    assert (listed["agents_holding_none"], listed["agents_holding_older"]) == (0, 0)

    # A release signed by A, whose key file every host still has, is refused by the control plane
    # (the newest root does not name A); a host would refuse it too (a control plane that served
    # it anyway: tests/agent_daemon/trust_roots/test_release_keys.py, with a real updater).
    with pytest.raises(WorldError, match="trust root v2 does not name"):
        night.plane.publish_release(signed_by_a, stage="everyone")
    for host, daemon in zip(hosts, daemons, strict=True):
        later = daemon.wait_for("slot.up_to_date", slot_key=LATER_SLOT)
        assert later["version"] == "1.5.0"
        assert host.current_version() == host.running_version() == "1.5.0"
        assert daemon.named("trust_root.refused") == []
