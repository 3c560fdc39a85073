"""A rollback end to end: 1.2.0 runs on some hosts, an operator rolls the pair back to 1.1.0, and
the hosts on 1.2.0 go back at their next slot through the organisation's cap — real daemons, a
real control plane on the embedded PostgreSQL, real builds signed with the real release tooling,
real install roots, on one fast fake clock.

The control plane holds no release key: until 1.1.0 is signed again as a downgrade the rollback
is refused, and no host moves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.agent_daemon.daemon_support.night import Night, NightClock, local

pytestmark = pytest.mark.slow

SLOT = "2026-11-30T03:00"


@pytest.fixture
def night(tmp_path: Path, control_plane_server: Callable[..., Any]) -> Iterator[Night]:
    # Held at 02:57 while the builds and the pre-installed hosts are set up; one grant a minute.
    scenario = Night(
        root=tmp_path / "night",
        clock=NightClock.held(local("2026-11-30T02:57"), begins=tmp_path / "clock", speed=60.0),
        start_control_plane=control_plane_server,
        control_plane_args=("--org-cap", "1"),
    )
    try:
        yield scenario
    finally:
        scenario.close()


def _roll_back(scenario: Night) -> httpx.Response:
    return scenario.operator.post(
        "/v1/admin/releases/rollback",
        json={
            "channel": "stable",
            "platform": "linux-x86_64",
            "to": "1.1.0",
            "reason": "1.2.0 loses its cache on restart",
        },
    )


def test_hosts_on_the_bad_build_go_back_through_the_cap_at_their_next_slot(night: Night) -> None:
    night.publish("1.1.0", 41)
    night.publish("1.2.0", 42, stage="everyone")
    on_bad = [night.add_host(f"web-0{n}", installed=("1.2.0", 42)) for n in (1, 2, 3)]
    stayed = night.add_host("db-01", installed=("1.1.0", 41))

    refused = _roll_back(night)
    assert refused.status_code == 409, refused.text
    assert refused.json()["detail"]["code"] == "rollback_not_signed"

    night.publish("1.1.0", 43, allow_downgrade=True)
    rolled = _roll_back(night)
    assert rolled.status_code == 200, rolled.text
    assert (rolled.json()["from_version"], rolled.json()["to_manifest_version"]) == ("1.2.0", 43)

    daemons = [host.start() for host in on_bad]
    stayed_daemon = stayed.start()
    for host, daemon in zip(on_bad, daemons, strict=True):
        done = daemon.wait_for("update.succeeded", slot_key=SLOT)
        assert done["version"] == "1.1.0"
        daemon.wait_for("report.delivered", run_id=done["run_id"])
        assert host.current_version() == host.running_version() == "1.1.0"
        (run,) = night.runs(host)
        assert (run["status"], run["from_version"], run["version"]) == (
            "succeeded",
            "1.2.0",
            "1.1.0",
        )
    # The organisation's cap of one grant per round held: each host in its own round.
    claimed = [run["claimed_at"][:16] for host in on_bad for run in night.runs(host)]
    assert len(set(claimed)) == len(on_bad)

    # Never on the bad build: nothing to do, and its install is untouched.
    stayed_daemon.wait_for("slot.up_to_date", slot_key=SLOT)
    assert stayed_daemon.named("claim.granted") == []
    assert stayed.current_version() == stayed.running_version() == "1.1.0"
