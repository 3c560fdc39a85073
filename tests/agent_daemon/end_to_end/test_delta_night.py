"""A night of delta updates with real daemons, a real control plane and real signed builds: the
hosts whose base the release has a patch from take the patch, the others (a base it has no patch
from) the full build; everyone ends on the new version and `/metrics` counts the bytes by kind."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent_daemon.daemon_support.night import Night, NightClock, local

pytestmark = pytest.mark.slow

SLOT = "2026-11-30T03:00"


@pytest.fixture
def night(tmp_path: Path, control_plane_server: Callable[..., Any]) -> Iterator[Night]:
    clock = NightClock.held(local("2026-11-30T02:57"), begins=tmp_path / "clock", speed=60.0)
    scenario = Night(root=tmp_path / "night", clock=clock, start_control_plane=control_plane_server)
    try:
        # At 60x the default 15-minute window is 15 real seconds from the slot to the last swap,
        # for four hosts started one after another once the clock runs, each downloading,
        # unpacking and self-testing on the same two shared cores. Measured with the cores
        # busy, the last swap came 7 product minutes into the slot; a busier machine ran past
        # the window's end and the control plane refused the swap (409 window_closed). An hour
        # keeps the night about the builds, not about the machine's load.
        answer = scenario.operator.put("/v1/admin/settings", json={"catch_up_minutes": 60})
        assert answer.status_code == 200, answer.text
        yield scenario
    finally:
        scenario.close()


def _metrics(scenario: Night) -> str:
    return scenario.operator.get("/metrics").text


def _served(scenario: Night, kind: str) -> int:
    text = _metrics(scenario)
    found = re.search(
        r'nachtwacht_release_bytes_served_total\{channel="stable",kind="' + kind
        + r'",platform="linux-x86_64",release="[0-9a-f-]{36}",version="1.5.0"\} (\d+)',
        text,
    )  # fmt: skip
    return int(found.group(1)) if found else 0


def test_half_the_fleet_takes_patches_and_the_other_half_full_builds(night: Night) -> None:
    scenario = night
    scenario.publish("1.4.1", 41)
    # The base release kept as a release engineer keeps it: its folder holds manifest and build.
    base_release = scenario.root / "release-stable-linux-x86_64-1.4.1-41"
    shutil.copy(scenario.root / "provibr-agent-1.4.1.tar.gz", base_release)
    # Two hosts of each kind, in one organisation: each starts its own daemon and managed agent.
    on_base = [scenario.add_host("web-01"), scenario.add_host("web-02")]
    unknown_base = [
        scenario.add_host("db-01", installed=("1.4.0", 40)),
        scenario.add_host("db-02", installed=("1.4.0", 40)),
    ]
    scenario.publish("1.5.0", 42, stage="everyone", bases=(base_release,))
    assert list(scenario.root.glob("patch-from-*.zst"))

    daemons = [host.start() for host in on_base + unknown_base]
    for daemon in daemons:
        succeeded = daemon.wait_for("update.succeeded", slot_key=SLOT)
        daemon.wait_for("report.delivered", run_id=succeeded["run_id"])
    for host in on_base + unknown_base:
        assert host.current_version() == "1.5.0"
    # Each outcome says how its build came: a host on another base had no patch to fall back from.
    deliveries = {
        host.name: [(r["delivery"], r["patch_fallback_reason"]) for r in scenario.runs(host)]
        for host in on_base + unknown_base
    }
    assert deliveries == {
        "web-01": [("patch", None)],
        "web-02": [("patch", None)],
        "db-01": [("full", None)],
        "db-02": [("full", None)],
    }
    assert not re.search(r"nachtwacht_patch_fallbacks_total\{[^}]*\} [1-9]", _metrics(scenario))

    patch_bytes, full_bytes = _served(scenario, "patch"), _served(scenario, "full")
    full_artifact = (scenario.root / "provibr-agent-1.5.0.tar.gz").stat().st_size
    patch_file = next(scenario.root.glob("patch-from-*.zst")).stat().st_size
    assert patch_bytes == 2 * patch_file
    assert full_bytes == 2 * full_artifact
