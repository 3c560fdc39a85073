"""The disk fills between the switch of the updater's own build and saving the claim's end, for
real: the daemon's process writes no file past 0 bytes from the switch on
(`limited_child.full_disk`), as every write on a full disk fails.

The daemon still restarts the unit (`current` names the new build; holding the restart back would
let the guard take a good build back), says at error level that the claim's end is not saved, and
leaves the state file as it was. The build it restarts into ends that claim from the switch's own
record before anything else: never carried on, nothing reported for the run until the switch's
outcome is known (the build the guard restored reports it once: test_switch_claim)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_daemon.updater.layout import InstallLayout
from tests.agent_daemon.limited_child import run_script
from tests.agent_daemon.self_update.own_build_kit import NEW, OLD

pytestmark = pytest.mark.slow

RUN_ID = "0b6f1c9e-3f59-4b0c-8a51-1f7c0e6b9d22"

_SCRIPT = """
import base64, hashlib, io, json, sys
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from agent_daemon.connection.config_cache import ConfigCache
from agent_daemon.connection.control_plane_client import ControlPlaneClient
from agent_daemon.connection.http_client import build_http_client
from agent_daemon.connection.outbox import Outbox
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.disk.daemon_state import ClaimInProgress, DaemonState, StateStore
from agent_daemon.host.event_log import EventLog, parse_line
from agent_daemon.minute.daemon import Daemon
from agent_daemon.self_update.own_builds import RunningBuild
from agent_daemon.self_update.pending_switch import SelfUpdateCheckIn, switch
from agent_daemon.updater.update_records import SwitchUnderWay
from tests.agent_daemon.daemon_support.fake_control_plane import FakeControlPlane
from tests.agent_daemon.daemon_support.stub_updater import StubUpdater
from tests.agent_daemon.limited_child import full_disk
from tests.worlds.clocks import ManualClock
from tests.worlds.releases import ReleaseFactory

own_root, state_dir, run_id, old, new = (
    Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
)
NOW = datetime(2026, 11, 30, 2, 3, tzinfo=UTC)
disk_filled = ExitStack()
clock = ManualClock(NOW)
release = ReleaseFactory(issued_at=NOW - timedelta(days=1)).sign(
    b"bundle" * 50, version=new, manifest_version=7, product="updater", unpacked_size=300
)
store = StateStore(state_dir / "daemon-state.json")
store.save(DaemonState(claim=ClaimInProgress(
    run_id=run_id, trigger="schedule", slot_key="2026-11-30T03:00", release_version=new,
    manifest_b64=base64.b64encode(release.manifest_bytes).decode(),
    signature_b64=base64.b64encode(release.signature).decode(),
    artifact_url="http://control.test/v1/agent/runs/x/artifact",
    claimed_at=NOW - timedelta(minutes=2),
    window_closes_at=NOW + timedelta(minutes=12), token_expires_at=NOW + timedelta(minutes=50),
)))


class OwnBuilds:
    # The host's mechanism up to the switch, then the disk is full.
    def __init__(self, running):
        self.running, self.restarts = running, 0

    def running_version(self):
        return self.running

    def accepted_floor(self, now):
        return None

    def accept(self, run):
        pass

    def apply(self, request):
        from agent_daemon.self_update.pending_switch import SwitchRun
        switch(
            own_root=own_root, state_dir=state_dir, to_version=new, now=datetime.now(UTC),
            restart=lambda: None,
            run=SwitchRun(run_id=request.run_id, to_version=new, switched_at=clock.now()),
        )
        disk_filled.enter_context(full_disk())
        return SwitchUnderWay(run_id=request.run_id, version=new, switched_at=clock.now())

    def restart(self):
        self.restarts += 1


def daemon(running, stream):
    plane = FakeControlPlane(now=clock.now, online=False)
    server_clock = ServerClock(clock, elapsed=lambda: clock.now().timestamp())
    http = build_http_client(
        base_url="http://control.test", credential="nwa_test_credential", timeout_seconds=5,
        transport=plane.transport(),
    )
    own = OwnBuilds(running)
    made = Daemon(
        control=ControlPlaneClient(http=http, server_clock=server_clock),
        updater=StubUpdater(), state_store=store,
        config_cache=ConfigCache(state_dir / "config-cache.json"),
        outbox=Outbox(state_dir / "outbox"), server_clock=server_clock,
        log=EventLog(now=server_clock.now, stream=stream), self_update=own,
        check_in=SelfUpdateCheckIn(
            state_dir=state_dir, running=RunningBuild(own_root=own_root, version=running)
        ),
    )
    return made, own

def files():
    return {
        str(p.relative_to(state_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(state_dir.rglob("*")) if p.is_file()
    }

old_log = io.StringIO()
old_daemon, old_own = daemon(old, old_log)
old_daemon.start()
before = files()
old_result = old_daemon.tick()
changed = sorted(k for k in set(before) | set(files()) if before.get(k) != files().get(k))
disk_filled.close()
claim_after_switch = store.load().claim

new_log = io.StringIO()
new_daemon, new_own = daemon(new, new_log)
new_daemon.start()
new_result = new_daemon.tick()
state = store.load()
print(json.dumps({
    "old_result": old_result,
    "restarts": old_own.restarts,
    "changed": changed,
    "claim_after_switch": None if claim_after_switch is None else claim_after_switch.run_id,
    "old_events": [parse_line(line) for line in old_log.getvalue().splitlines()],
    "new_result": new_result,
    "new_events": [parse_line(line) for line in new_log.getvalue().splitlines()],
    "claim": None if state.claim is None else state.claim.run_id,
    "runs": [[r.run_id, r.status] for r in state.recent_runs],
    "outbox": [r.run_id for r in Outbox(state_dir / "outbox").pending()],
}, default=str))
"""


def test_a_switch_whose_end_the_full_disk_refuses_restarts_loudly_and_is_ended_once(
    layout: InstallLayout, state_dir: Path
) -> None:
    found = run_script(_SCRIPT, str(layout.root), str(state_dir), RUN_ID, OLD, NEW)

    # The old build: switched, could not save the claim's end, restarted all the same, loudly.
    assert found["old_result"] == "dispatched"
    assert found["restarts"] == 1
    assert layout.link_target("current") == NEW
    assert found["claim_after_switch"] == RUN_ID
    # Only the switch's own files changed (written before the disk filled), and the state file's
    # save of `dispatching` before the switch; no half-written state file.
    assert all(
        name.startswith("self-update/") or name == "daemon-state.json" for name in found["changed"]
    )
    old_events = found["old_events"]
    [unsaved] = [e for e in old_events if e["event"] == "self_update.claim_unsaved"]
    assert unsaved["level"] == "error"
    assert unsaved["run_id"] == RUN_ID
    assert "File too large" in unsaved["error"]
    names = [e["event"] for e in old_events]
    assert names.index("self_update.claim_unsaved") < names.index("self_update.switching")
    assert "tick.crashed" not in names

    # The new build: the claim ended from the switch's record, never carried on or reported.
    new_names = [e["event"] for e in found["new_events"]]
    assert "update.pending" not in new_names
    assert "update.dispatching" not in new_names
    assert "update.failed" not in new_names
    assert found["claim"] is None
    assert [run for run in found["runs"] if run[0] == RUN_ID] == []
    assert found["outbox"] == []
    assert found["new_result"] != "dispatched"
