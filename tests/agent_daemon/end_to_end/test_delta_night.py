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
    yield scenario
    scenario.close()


def _served(scenario: Night, kind: str) -> int:
    text = scenario.operator.get("/metrics").text
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
    # One host of each kind: every host starts its own daemon and managed agent on two shared cores.
    on_base = [scenario.add_host("web-01")]
    unknown_base = [scenario.add_host("db-01", installed=("1.4.0", 40))]
    scenario.publish("1.5.0", 42, stage="everyone", bases=(base_release,))
    assert list(scenario.root.glob("patch-from-*.zst"))

    daemons = [host.start() for host in on_base + unknown_base]
    for daemon in daemons:
        succeeded = daemon.wait_for("update.succeeded", slot_key=SLOT)
        daemon.wait_for("report.delivered", run_id=succeeded["run_id"])
    for host in on_base + unknown_base:
        assert host.current_version() == "1.5.0"

    patch_bytes, full_bytes = _served(scenario, "patch"), _served(scenario, "full")
    full_artifact = (scenario.root / "provibr-agent-1.5.0.tar.gz").stat().st_size
    patch_file = next(scenario.root.glob("patch-from-*.zst")).stat().st_size
    assert patch_bytes == patch_file
    assert full_bytes == full_artifact
