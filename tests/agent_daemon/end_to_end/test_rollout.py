"""A staged rollout end to end: the canary stage with real daemons, a real control plane (its
reconcile worker included) on the embedded PostgreSQL, real signed builds and real install roots, on
one fast fake clock.

Every wait is for a product instant or an event, bounded by a generous deadline for failures;
nothing asserts how long anything took.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.agent_daemon.daemon_support.night import Night, NightClock, local

pytestmark = pytest.mark.slow

SLOT = "2026-11-30T03:00"
LATER_SLOT = "2026-11-30T03:20"


@pytest.fixture
def new_night(
    tmp_path: Path, control_plane_server: Callable[..., Any]
) -> Iterator[Callable[..., Night]]:
    opened: list[Night] = []

    def open_night(*args: str) -> Night:
        # Held at 02:57 while two builds and several pre-installed hosts are set up.
        clock = NightClock.held(
            local("2026-11-30T02:57"), begins=tmp_path / f"clock-{len(opened)}", speed=60.0
        )
        scenario = Night(
            root=tmp_path / f"night-{len(opened)}",
            clock=clock,
            start_control_plane=control_plane_server,
            control_plane_args=args,
        )
        opened.append(scenario)
        return scenario

    yield open_night
    for scenario in opened:
        scenario.close()


def _ok(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code in (200, 201), answer.text
    body: dict[str, Any] = answer.json()
    return body


def _release_id(scenario: Night, version: str) -> str:
    for track in _ok(scenario.operator.get("/v1/admin/releases"))["tracks"]:
        for entry in track["releases"]:
            if entry["version"] == version:
                return str(entry["id"])
    raise AssertionError(f"no release {version}")


def _wait_for_notices(scenario: Night, until: str) -> list[dict[str, Any]]:
    """The operators' inbox once it holds a notice, checked each product minute until `until`."""
    deadline = local(until)
    while True:
        notices: list[dict[str, Any]] = _ok(scenario.operator.get("/v1/admin/notices"))["notices"]
        if notices or scenario.clock.now() >= deadline:
            return notices
        scenario.clock.wait_until(scenario.clock.now() + timedelta(minutes=1))


def test_a_canary_that_fails_its_health_check_halts_the_release_for_everyone(
    new_night: Callable[..., Night],
) -> None:
    scenario = new_night()
    scenario.publish("1.5.0", 42)
    canary = scenario.add_host("canary-01", installed=("1.5.0", 42))
    others = [scenario.add_host(f"web-0{n}", installed=("1.5.0", 42)) for n in (1, 2)]
    # The broken build is rolled back well inside the window.
    scenario.configure(canary, health_deadline_seconds=120.0)
    _ok(
        scenario.operator.patch(
            "/v1/admin/rollout/settings",
            json={"canary_share_percent": 0, "halt_failures": 1, "halt_rate_percent": 50},
        )
    )
    _ok(scenario.operator.put(f"/v1/admin/agents/{canary.agent_id}/canary", json={"canary": True}))
    scenario.publish("1.6.0", 43, fault="never-healthy")

    canary_daemon = canary.start()
    other_daemons = [host.start() for host in others]
    rolled_back = canary_daemon.wait_for("update.rolled_back", slot_key=SLOT)
    canary_daemon.wait_for("report.delivered", run_id=rolled_back["run_id"])

    notices = _wait_for_notices(scenario, until="2026-11-30T03:40")
    assert len(notices) == 1
    assert notices[0]["body"]["version"] == "1.6.0"
    assert notices[0]["body"]["runs"] == [rolled_back["run_id"]]
    halts = _ok(scenario.operator.get(f"/v1/admin/releases/{_release_id(scenario, '1.6.0')}/halts"))
    assert [halt["cause"] for halt in halts["halts"]] == ["errors"]

    # The other hosts were offered the previous release, which they run: nothing to do.
    for host, daemon in zip(others, other_daemons, strict=True):
        daemon.wait_for("slot.up_to_date", slot_key=SLOT)
        # "Nothing to do" is logged before its report reaches the control plane; read after it.
        daemon.wait_for("report.delivered", slot_key=SLOT, status="up_to_date")
        assert daemon.named("claim.granted") == []
        assert [run["status"] for run in scenario.runs(host)] == ["up_to_date"]
        assert host.current_version() == "1.5.0"
    assert canary.current_version() == "1.5.0"
    # One notice, however many passes ran since.
    scenario.clock.wait_until(scenario.clock.now() + timedelta(minutes=2))
    assert len(_ok(scenario.operator.get("/v1/admin/notices"))["notices"]) == 1


def test_good_canaries_are_promoted_after_the_soak_and_the_fleet_follows_within_the_cap(
    new_night: Callable[..., Night],
) -> None:
    scenario = new_night("--org-cap", "1")
    scenario.publish("1.5.0", 42)
    canary = scenario.add_host("canary-01", installed=("1.5.0", 42))
    fleet = [scenario.add_host(f"web-0{n}", installed=("1.5.0", 42)) for n in (1, 2, 3)]
    _ok(
        scenario.operator.patch(
            "/v1/admin/rollout/settings",
            # Two waves: the marked canary, then everyone.
            json={
                "soak_minutes": 5,
                "waves": [{"share_percent": 0, "canaries": True}, {"share_percent": 100}],
            },
        )
    )
    _ok(scenario.operator.put(f"/v1/admin/agents/{canary.agent_id}/canary", json={"canary": True}))
    # The fleet's next slot after the soak stands for "the next night".
    for host in fleet:
        scenario.set_schedule(host, ["03:00", "03:20"])
    scenario.publish("1.6.0", 43)

    canary_daemon = canary.start()
    fleet_daemons = [host.start() for host in fleet]
    succeeded = canary_daemon.wait_for("update.succeeded", slot_key=SLOT)
    canary_daemon.wait_for("report.delivered", run_id=succeeded["run_id"])
    for daemon in fleet_daemons:
        daemon.wait_for("slot.up_to_date", slot_key=SLOT)  # offered 1.5.0 during the canary stage

    for daemon in fleet_daemons:
        done = daemon.wait_for("update.succeeded", slot_key=LATER_SLOT)
        assert done["version"] == "1.6.0"
        # The success is logged before its report reaches the control plane; count after it.
        daemon.wait_for("report.delivered", run_id=done["run_id"])
    stage = _ok(scenario.operator.get("/v1/admin/rollout"))["pairs"][0]
    assert (stage["version"], stage["stage"]) == ("1.6.0", "everyone")
    assert stage["up_to_date"] == 4
    # The organisation's cap of one grant per round held: each grant in its own round.
    claimed = [
        run["claimed_at"][:16]
        for host in fleet
        for run in scenario.runs(host)
        if run["slot_key"] == LATER_SLOT
    ]
    assert len(claimed) == len(fleet)
    assert len(set(claimed)) == len(fleet)


def test_a_releases_brake_skips_the_night_of_the_hosts_offered_it_and_misses_none(
    new_night: Callable[..., Night],
) -> None:
    """One release's brake for the whole window: the daemon offered it asks and is refused
    `release_halted`, and its slot is recorded `skipped` with that reason — the reconcile worker
    records no miss for it. A host already on the release has nothing to do; a host whose
    daemon never runs misses its night as `offline`, the release's brake or not."""
    scenario = new_night()
    scenario.publish("1.5.0", 42)
    offered = scenario.add_host("web-01")
    current = scenario.add_host("web-02", installed=("1.5.0", 42))
    switched_off = scenario.add_host("web-03")
    _ok(
        scenario.operator.put(
            f"/v1/admin/releases/{_release_id(scenario, '1.5.0')}/brake",
            json={"engaged": True, "reason": "fills the disk"},
        )
    )
    offered_daemon, current_daemon = offered.start(), current.start()
    gone = offered_daemon.wait_for("claim.slot_gone", slot_key=SLOT)
    assert gone["code"] == "release_halted"
    current_daemon.wait_for("report.delivered", slot_key=SLOT, status="up_to_date")

    def slot_runs(host: Any) -> list[tuple[str, str | None]]:
        return [
            (run["status"], run["miss_reason"] or run["skip_reason"])
            for run in scenario.runs(host)
            if run["slot_key"] == SLOT
        ]

    # The worker's pass after the window (03:15) and its settling margin.
    while not slot_runs(switched_off):
        assert scenario.clock.now() < local("2026-11-30T03:40"), "no pass recorded the miss"
        scenario.clock.wait_until(scenario.clock.now() + timedelta(minutes=1))
    assert slot_runs(switched_off) == [("missed", "offline")]
    assert slot_runs(offered) == [("skipped", "release_halted")]
    assert slot_runs(current) == [("up_to_date", None)]
    assert offered.current_version() == "1.4.1"
