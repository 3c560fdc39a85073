"""A night through the shipped nginx site: real agent daemons given the balancer's https address
and the test CA (`--ca-file`), two control-plane replicas over one database behind it.

Every wait is for a product instant or an event, bounded by a generous deadline for failures."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent_daemon.daemon_support.night import Host, Night, NightClock, local
from tests.worlds.balancer import Balancer, nginx_balancer
from tests.worlds.daemons import DaemonProcess
from tests.worlds.waiting import wait_until

pytestmark = pytest.mark.slow

SLOT = "2026-11-30T03:00"
HOSTS = 6
# Two grants a minute for the organisation: the night's grants spread over three rounds, so a
# replica killed after the first grant dies with the window open and claims still to come.
ORG_CAP = "2"
CAPS = {"org_cap", "global_cap"}


@pytest.fixture
def balanced_night(
    tmp_path: Path, control_plane_server: Callable[..., Any]
) -> Iterator[tuple[Night, Any, Balancer]]:
    """The night (its control plane the first replica), a second replica, and nginx in front."""
    # Ten times real speed, from 02:55: six daemons start (one after another) before the slot,
    # and the window's 15 minutes are 90 real seconds, room for three rounds of grants and
    # their downloads on a loaded machine (at 30x, two such nights side by side ran out of it).
    clock = NightClock.held(local("2026-11-30T02:55"), begins=tmp_path / "clock", speed=10)
    night = Night(
        root=tmp_path / "night",
        clock=clock,
        start_control_plane=control_plane_server,
        control_plane_args=("--org-cap", ORG_CAP),
    )
    second = control_plane_server(
        fake_clock=clock.setting, env=night.env, args=["--org-cap", ORG_CAP]
    )
    try:
        replicas = [night.plane.base_url, second.base_url]
        with nginx_balancer(tmp_path / "nginx", replicas) as balancer:
            night.agents_url = balancer.url
            yield night, second, balancer
    finally:
        night.close()


def add_hosts(night: Night, balancer: Balancer) -> list[Host]:
    trust = ("--ca-file", str(balancer.ca_file))
    return [night.add_host(f"web-{n:02}", enroll_args=trust) for n in range(1, HOSTS + 1)]


def updated(daemon: DaemonProcess) -> dict[str, Any]:
    succeeded: dict[str, Any] = daemon.wait_for("update.succeeded", slot_key=SLOT)
    daemon.wait_for("report.delivered", run_id=succeeded["run_id"])
    return succeeded


def assert_everyone_updated_once(night: Night, hosts: list[Host]) -> None:
    for host in hosts:
        runs = [run for run in night.runs(host) if run.get("slot_key") == SLOT]
        assert [run["status"] for run in runs] == ["succeeded"], (host.name, runs)
        assert host.current_version() == "1.5.0"
        refused = {e["code"] for e in host.daemon.named("claim.refused", slot_key=SLOT)}
        assert refused <= CAPS, (host.name, refused)


def address(url: str) -> str:
    return url.removeprefix("http://").rstrip("/")


def agents_lines(balancer: Balancer) -> list[str]:
    return [line for line in balancer.access() if " /v1/agent/" in line]


def test_a_night_through_nginx_with_tls_updates_everyone_over_both_replicas(
    balanced_night: tuple[Night, Any, Balancer],
) -> None:
    night, second, balancer = balanced_night
    night.publish("1.5.0", 42)
    hosts = add_hosts(night, balancer)
    daemons = [host.start() for host in hosts]
    assert [updated(daemon)["version"] for daemon in daemons] == ["1.5.0"] * HOSTS
    assert_everyone_updated_once(night, hosts)
    lines = agents_lines(balancer)
    for replica in (night.plane.base_url, second.base_url):
        assert any(f"upstream={address(replica)} " in line for line in lines), replica
    assert not [line for line in lines if " 502 " in line or " 504 " in line]


def test_a_replica_killed_mid_window_strands_no_agent(
    balanced_night: tuple[Night, Any, Balancer],
) -> None:
    night, second, balancer = balanced_night
    night.publish("1.5.0", 42)
    hosts = add_hosts(night, balancer)
    daemons = [host.start() for host in hosts]
    wait_until(
        lambda: any(daemon.named("claim.granted", slot_key=SLOT) for daemon in daemons),
        what="the night's first grant",
    )
    granted_before = sum(bool(d.named("claim.granted", slot_key=SLOT)) for d in daemons)
    second.process.kill()
    second.process.wait()
    assert granted_before < HOSTS, "every claim was granted before the kill: nothing was tested"
    assert [updated(daemon)["version"] for daemon in daemons] == ["1.5.0"] * HOSTS
    assert_everyone_updated_once(night, hosts)
    # The dead replica was asked after its death, and each such request passed to the other.
    lines = agents_lines(balancer)
    dead, alive = address(second.base_url), address(night.plane.base_url)
    assert any(f"upstream={dead}, {alive} " in line for line in lines), "\n".join(lines)
    assert not [line for line in lines if " 502 " in line or " 504 " in line]
