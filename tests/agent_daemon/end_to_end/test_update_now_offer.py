""" "Update now" is offered what the schedule would be, end to end: a real control plane on the
embedded PostgreSQL, a real `nachtwacht agent run` daemon, real signed builds and a real install
root, on one fast fake clock. An organisation pinned to 1.0.0 while 1.2.0 is current for everyone:
the agent's manual update installs 1.0.0, never the newest.

Every wait is for a product instant or an event, bounded by a generous deadline for failures;
nothing asserts how long anything took.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent_daemon.daemon_support.night import Night, NightClock, local

pytestmark = pytest.mark.slow


@pytest.fixture
def afternoon(tmp_path: Path, control_plane_server: Any) -> Iterator[Night]:
    # 10:00: no scheduled slot is due, so only the manual update can change the host.
    clock = NightClock.held(local("2026-11-30T10:00"), begins=tmp_path / "clock", speed=60.0)
    scenario = Night(root=tmp_path / "night", clock=clock, start_control_plane=control_plane_server)
    try:
        yield scenario
    finally:
        scenario.close()


def test_update_now_in_a_pinned_organisation_installs_the_pinned_version(afternoon: Night) -> None:
    scenario = afternoon
    scenario.publish("1.0.0", 40)
    scenario.publish("1.2.0", 41, stage="everyone")
    host = scenario.add_host("web-01", installed=("0.9.0", 39))
    pinned = scenario.operator.put(
        f"/v1/admin/orgs/{scenario.org_id}/pin",
        json={"version": "1.0.0", "reason": "their database needs 1.0"},
    )
    assert pinned.status_code == 200, pinned.text

    daemon = host.start()
    daemon.wait_for("config.synced")
    requested = scenario.panel.post(f"/v1/agents/{host.agent_id}/update")
    assert requested.status_code == 202, requested.text
    run_id = requested.json()["run_id"]
    granted = daemon.wait_for("manual.granted", run_id=run_id)
    assert granted["version"] == "1.0.0"
    done = daemon.wait_for("update.succeeded", run_id=run_id)
    assert done["version"] == "1.0.0"
    daemon.wait_for("report.delivered", run_id=run_id)
    assert host.current_version() == "1.0.0"
    assert host.running_version() == "1.0.0"
    assert "1.2.0" not in host.installed_versions()
    (run,) = scenario.runs(host)
    assert (run["trigger"], run["status"], run["version"]) == ("manual", "succeeded", "1.0.0")
