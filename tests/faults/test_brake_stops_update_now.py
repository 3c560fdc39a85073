"""The brake stops a manual update already under way, with real parts: a real control plane on the
embedded PostgreSQL and the fast clock, a real `nachtwacht agent run` daemon, a real signed build,
and a throttling proxy on loopback so "mid-download" is a real moment. The brake is engaged with
`revoke_outstanding` while the manual update's download is held: the download already under way
may finish, but the swap is refused, the old version stays installed and the run ends refused
(failed, because its permission was withdrawn).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.faults.world import FaultNight, assert_safe, fault_night

pytestmark = pytest.mark.slow


@pytest.fixture
def afternoon(tmp_path: Path, control_plane_server: Callable[..., Any]) -> Iterator[FaultNight]:
    # 10:00: no scheduled slot is due; the manual update is the only one.
    with fault_night(tmp_path / "night", control_plane_server, start="2026-11-30T10:00") as world:
        yield world


def test_the_brake_engaged_mid_download_refuses_a_manual_updates_swap(
    afternoon: FaultNight,
) -> None:
    night = afternoon
    host = night.add_host("web-01")
    night.proxy.hold_after(1024)
    daemon = host.start()
    daemon.wait_for("config.synced")
    requested = night.night.panel.post(f"/v1/agents/{host.agent_id}/update")
    assert requested.status_code == 202, requested.text
    run_id = requested.json()["run_id"]
    daemon.wait_for("manual.granted", run_id=run_id)
    night.proxy.wait_until_held()
    night.night.set_brake(True)  # revoke_outstanding: the manual run's token too
    night.proxy.release()
    refused = daemon.wait_for("swap.refused", run_id=run_id)
    assert refused["code"] == "token_revoked"
    ended = daemon.wait_for("update.failed", run_id=run_id)
    assert ended["reason"] == "token_revoked"
    daemon.wait_for("report.delivered", run_id=run_id)
    assert host.current_version() == "1.4.1"
    assert host.running_version() == "1.4.1"
    (run,) = night.night.runs(host)
    assert (run["trigger"], run["status"], run["reason"]) == ("manual", "failed", "token_revoked")
    assert not (host.agent.install_root / "versions" / "1.5.0").exists()
    assert_safe(host)
