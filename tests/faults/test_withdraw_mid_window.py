"""A release withdrawn mid-window, with every part real: a release withdrawn by an operator while
two agents download it (held mid-body by the throttling proxy). Their confirmations are refused,
nothing is installed half, `current` stays the complete old version, and the next claim — by a
host that starts after the withdrawal, in the same window — is granted the pair's previous
release.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent_daemon.daemon_support.features import needs_confirm_route
from tests.agent_daemon.daemon_support.night import Night, NightClock
from tests.faults.night_record import (
    WIDE_WINDOW_CLOSES,
    run_events,
    the_one_run,
    wait_for_run,
    widen_window,
)
from tests.faults.throttling_proxy import throttling_proxy
from tests.faults.world import SLOT, SPEED, FaultNight, assert_safe, local
from tests.worlds.waiting import wait_until

pytestmark = [pytest.mark.slow, needs_confirm_route]

# A deadline for a failure, not a speed expectation.
_DEADLINE_SECONDS = 120.0


@pytest.fixture
def night(tmp_path: Path, control_plane_server: Callable[..., Any]) -> Iterator[FaultNight]:
    """A fault night whose pair had 1.4.1 before 1.5.0 (published to everyone at once), so a
    withdrawal of 1.5.0 has a previous release to fall back to."""
    plain = Night(
        root=tmp_path / "night",
        # Held at 02:58 while three hosts, one of them on an older build, are set up.
        clock=NightClock.held(local("2026-11-30T02:58"), begins=tmp_path / "clock", speed=SPEED),
        start_control_plane=control_plane_server,
    )
    try:
        with throttling_proxy(plain.plane.base_url) as proxy:
            plain.publish("1.4.1", 41)
            plain.publish("1.5.0", 42, stage="everyone")
            yield FaultNight(plain, proxy)
    finally:
        plain.close()
        for host in plain.hosts:
            for daemon in host.daemons:
                assert daemon.process.poll() is not None, f"{host.name}: a daemon still runs"


def _release_id(night: FaultNight, version: str) -> str:
    answer = night.night.operator.get("/v1/admin/releases")
    assert answer.status_code == 200, answer.text
    for track in answer.json()["tracks"]:
        for entry in track["releases"]:
            if entry["version"] == version:
                return str(entry["id"])
    raise AssertionError(f"no release {version}")


def _wait_for_held_downloads(night: FaultNight, count: int) -> None:
    wait_until(
        lambda: sum(1 for request in night.proxy.artifacts() if request.sent >= 1024) >= count,
        what=f"{count} downloads to reach the hold",
        timeout=_DEADLINE_SECONDS,
    )


def test_a_release_withdrawn_mid_download_is_never_installed_and_the_next_claim_gets_the_previous(
    night: FaultNight,
) -> None:
    widen_window(night)
    downloading = [night.add_host("web-01"), night.add_host("web-02")]
    # On 1.3.0, talking to the control plane directly; it starts only after the withdrawal.
    newcomer = night.night.add_host("db-01", installed=("1.3.0", 40))
    night.proxy.hold_after(1024)
    daemons = [host.start() for host in downloading]
    grants = [daemon.wait_for("claim.granted", slot_key=SLOT) for daemon in daemons]
    assert {grant["version"] for grant in grants} == {"1.5.0"}
    _wait_for_held_downloads(night, 2)

    withdrawn = night.night.operator.post(
        f"/v1/admin/releases/{_release_id(night, '1.5.0')}/withdraw",
        json={"reason": "1.5.0 corrupts the cache on upgrade"},
    )
    assert withdrawn.status_code == 200, withdrawn.text
    night.proxy.release()  # the bodies already under way finish; the switch must not

    for host, daemon, grant in zip(downloading, daemons, grants, strict=True):
        ended = daemon.wait_for("update.failed", run_id=grant["run_id"])
        assert ended["reason"] == "token_revoked", ended
        daemon.wait_for("report.delivered", run_id=grant["run_id"])
        assert daemon.named("swap.permitted") == []
        run = wait_for_run(night, host, "failed")
        assert (run["reason"], run["switched_at"]) == ("token_revoked", None)
        assert run["release_version"] == "1.5.0"
        assert run_events(night, host, grant["run_id"]) == [
            ("update.scheduled", None),
            ("update.failed", "token_revoked"),
        ]
        # Nothing installed half: no 1.5.0 beside the complete 1.4.1 that stays current.
        assert not (host.agent.install_root / "versions" / "1.5.0").exists()
        assert host.current_version() == host.running_version() == "1.4.1"
        assert_safe(host, window_closes=WIDE_WINDOW_CLOSES)

    # The next claim in the same window is granted the pair's previous release.
    daemon = newcomer.start()
    granted = daemon.wait_for("claim.granted", slot_key=SLOT)
    assert granted["version"] == "1.4.1"
    daemon.wait_for("update.succeeded", run_id=granted["run_id"])
    daemon.wait_for("report.delivered", run_id=granted["run_id"])
    run = the_one_run(night, newcomer)
    assert (run["status"], run["release_version"], run["version"]) == (
        "succeeded",
        "1.4.1",
        "1.4.1",
    )
    assert run_events(night, newcomer, granted["run_id"]) == [
        ("update.scheduled", None),
        ("update.succeeded", None),
    ]
    assert newcomer.current_version() == newcomer.running_version() == "1.4.1"
    assert_safe(newcomer, window_closes=WIDE_WINDOW_CLOSES)
