"""Faults on the agent's side of a night, with real parts: a real control plane on the embedded
PostgreSQL and the fast clock, real `nachtwacht agent run` daemons, real signed builds, and a
throttling proxy on loopback so "mid-download" is a real moment. Each test ends with
`assert_safe`: `current` names one complete version, no switch outside its window, nothing left
running (checked when the night closes).

Tests that need the control plane's confirmation route (`POST confirm_path(run_id)`, the control
plane's side of a confirmed swap) skip while this checkout's control plane lacks it
(`CONFIRM_ROUTE_MISSING`, read from its OpenAPI), and run by themselves once it is there.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_daemon.minute.dispatch import MAX_DISPATCH_ATTEMPTS
from tests.agent_daemon.daemon_support.features import needs_confirm_route
from tests.faults.world import (
    CONFIRM_ROUTE_MISSING,
    SLOT,
    FaultNight,
    assert_safe,
    fault_night,
    local,
)
from tests.worlds.waiting import wait_until

pytestmark = pytest.mark.slow

NEEDS_CONFIRM = needs_confirm_route
# The updater checks for the download plus a 50 MiB reserve before it starts; the tmpfs passes
# that check, and is then filled mid-download.
TMPFS_SIZE = "56m"


@pytest.fixture
def night(tmp_path: Path, control_plane_server: Callable[..., Any]) -> Iterator[FaultNight]:
    with fault_night(tmp_path / "night", control_plane_server) as world:
        yield world


def test_killed_mid_download_and_restarted_after_the_window_never_switches(
    night: FaultNight,
) -> None:
    host = night.add_host("web-01")
    night.proxy.hold_after(1024)
    daemon = host.start()
    granted = daemon.wait_for("claim.granted", slot_key=SLOT)
    held = night.proxy.wait_until_held()
    assert held.sent == 1024
    daemon.kill()  # SIGKILL, mid-download
    assert host.current_version() == "1.4.1"
    night.proxy.release()
    night.wait_until("2026-11-30T03:17")
    restarted = host.start()
    ended = restarted.wait_for("update.failed", run_id=granted["run_id"])
    assert ended["reason"] == "interrupted"
    restarted.wait_for("report.delivered", run_id=granted["run_id"])
    assert restarted.named("update.dispatching") == []
    assert restarted.named("swap.permitted") == []
    assert [run["status"] for run in night.runs(host)] == ["failed"]
    assert host.current_version() == "1.4.1"
    assert host.running_version() == "1.4.1"
    assert len(night.proxy.artifacts()) == 1, "no download after the window"
    assert_safe(host)


def test_a_download_cut_mid_way_is_resumed_on_a_later_minute(night: FaultNight) -> None:
    host = night.add_host("web-01")
    night.proxy.hold_after(1024)
    daemon = host.start()
    granted = daemon.wait_for("claim.granted", slot_key=SLOT)
    night.proxy.wait_until_held()
    night.proxy.cut()  # the connection drops mid-body: transient, inside the window
    retrying = daemon.wait_for("update.retrying", run_id=granted["run_id"])
    assert retrying["reason"] == "download_failed"
    second = daemon.wait_for("update.dispatching", run_id=granted["run_id"], attempt=1, count=2)
    assert second["run_id"] == granted["run_id"]
    wait_for_artifact_requests(night, 2)
    if not CONFIRM_ROUTE_MISSING:
        daemon.wait_for("update.succeeded", run_id=granted["run_id"])
    ranges = [request.range for request in night.proxy.artifacts()]
    assert ranges[:2] == [None, "bytes=1024-"], "the partial download is resumed, not restarted"
    assert len(daemon.named("claim.granted")) == 1
    assert_safe(host)


@NEEDS_CONFIRM
def test_the_brake_engaged_mid_download_is_honoured_at_the_swap(night: FaultNight) -> None:
    host = night.add_host("web-01")
    night.proxy.hold_after(1024)
    daemon = host.start()
    granted = daemon.wait_for("claim.granted", slot_key=SLOT)
    night.proxy.wait_until_held()
    night.night.set_brake(True)  # revoke_outstanding: this run's token is revoked
    night.proxy.release()  # the download already under way finishes
    refused = daemon.wait_for("swap.refused", run_id=granted["run_id"])
    assert refused["code"] == "token_revoked"
    ended = daemon.wait_for("update.failed", run_id=granted["run_id"])
    assert ended["reason"] == "token_revoked"
    daemon.wait_for("report.delivered", run_id=granted["run_id"])
    assert host.current_version() == "1.4.1"
    assert host.running_version() == "1.4.1"
    assert [run["status"] for run in night.runs(host)] == ["failed"]
    assert not (host.agent.install_root / "versions" / "1.5.0").exists()
    assert_safe(host)


@NEEDS_CONFIRM
def test_a_download_that_outlasts_the_window_ends_window_closed_and_halts_nothing(
    night: FaultNight,
) -> None:
    """Nothing fails on the way: the build arrives whole, but after the window closed, so the
    control plane refuses the switch. The run says so (`window_closed`), not `interrupted`, and
    it counts as refused, never towards its release's automatic halt."""
    # One failure of the build would halt 1.5.0.
    answer = night.night.operator.patch(
        "/v1/admin/rollout/settings", json={"halt_failures": 1, "halt_rate_percent": 1}
    )
    assert answer.status_code == 200, answer.text
    # A 5-minute window, and a download that may stay silent for 10 minutes before the agent
    # cuts it off: the held download is slow, never failing.
    answer = night.night.operator.put("/v1/admin/settings", json={"catch_up_minutes": 5})
    assert answer.status_code == 200, answer.text
    host = night.add_host("web-01", download_read_timeout_seconds=600)
    night.proxy.hold_after(1024)
    daemon = host.start()
    granted = daemon.wait_for("claim.granted", slot_key=SLOT)
    night.proxy.wait_until_held()
    night.wait_until("2026-11-30T03:06")
    night.proxy.release()
    refused = daemon.wait_for("swap.refused", run_id=granted["run_id"])
    assert refused["code"] == "window_closed"
    ended = daemon.wait_for("update.failed", run_id=granted["run_id"])
    assert ended["reason"] == "window_closed"
    daemon.wait_for("report.delivered", run_id=granted["run_id"])
    assert daemon.named("update.retrying") == []
    (run,) = night.runs(host)
    assert (run["status"], run["reason"]) == ("failed", "window_closed")
    assert host.current_version() == "1.4.1"
    # The reconcile worker's rollout step runs every 30 product seconds.
    night.wait_until("2026-11-30T03:09")
    metrics = night.night.operator.get("/metrics").text
    halted = [line for line in metrics.splitlines() if line.startswith("nachtwacht_release_halted")]
    assert halted and all(line.endswith(" 0") for line in halted), halted
    refused = r'outcomes_total\{[^}]*outcome="refused"[^}]*reason="window_closed"[^}]*\} 1$'
    assert re.search(refused, metrics, re.MULTILINE), metrics
    assert_safe(host, window_closes=local("2026-11-30T03:05"))


@NEEDS_CONFIRM
def test_a_permitted_update_reports_when_it_switched(night: FaultNight) -> None:
    host = night.add_host("web-01")
    daemon = host.start()
    succeeded = daemon.wait_for("update.succeeded", slot_key=SLOT)
    assert succeeded["switched_at"] is not None
    daemon.wait_for("report.delivered", run_id=succeeded["run_id"])
    assert host.current_version() == "1.5.0"
    assert [run["status"] for run in night.runs(host)] == ["succeeded"]
    assert_safe(host)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_state_directory_mid_download_is_reported_disk_full_and_never_switched(
    night: FaultNight, tmp_path: Path
) -> None:
    host = night.add_host("web-01")
    state = host.agent.state_dir
    saved = tmp_path / "state-before-tmpfs"
    subprocess.run(["cp", "-a", str(state), str(saved)], check=True)
    options = f"size={TMPFS_SIZE},mode=0700"
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(state)], check=True)
    try:
        subprocess.run(["cp", "-a", f"{saved}/.", str(state)], check=True)
        night.proxy.hold_after(1024)
        daemon = host.start()
        granted = daemon.wait_for("claim.granted", slot_key=SLOT)
        night.proxy.wait_until_held()
        fill(state / "filler")  # the state directory is full from here on
        night.proxy.release()
        ended = daemon.wait_for("update.failed", run_id=granted["run_id"])
        assert ended["reason"] == "disk_full"
        daemon.wait_for("report.delivered", run_id=granted["run_id"])
        # Neither the report nor the attempt bound depended on the full disk.
        assert daemon.named("outbox.write_failed", run_id=granted["run_id"])
        attempts = daemon.named("update.dispatching", run_id=granted["run_id"])
        assert len(attempts) <= MAX_DISPATCH_ATTEMPTS
        assert [run["status"] for run in night.runs(host)] == ["failed"]
        (state / "filler").unlink()  # space returns: still nothing switched outside the window
        night.wait_until("2026-11-30T03:18")
        assert host.current_version() == "1.4.1"
        assert daemon.named("swap.permitted") == []
        assert_safe(host)
        for running in host.daemons:
            running.terminate()
    finally:
        subprocess.run(["umount", "-l", str(state)], check=False)


def wait_for_artifact_requests(night: FaultNight, count: int) -> None:
    wait_until(lambda: len(night.proxy.artifacts()) >= count, what=f"{count} artifact requests")


def fill(path: Path) -> None:
    """Write until the file system says it is full (big pieces first, then small ones)."""
    with path.open("wb", buffering=0) as sink:
        for piece in (1024 * 1024, 4096, 1):
            try:
                while True:
                    sink.write(b"\0" * piece)
            except OSError:
                continue
