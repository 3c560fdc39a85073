"""A state directory on a full disk, for real: the daemon's minutes run in a process whose every
file write past 0 bytes fails (`limited_child.full_disk`), as every write on a full disk does.
The minutes end, each failure is a line, not one file in the state directory changes — no
half-written file, no temporary file left behind — and:

- a claim that cannot be saved is never dispatched (after a restart it could be repeated or
  lost): it waits for the disk inside its window, then ends `failed` (`disk_full`), reported once;
- a slot with nothing to do is reported once, not every minute of its window;
- once the disk has room, what the full disk held back is written: `agent status` shows it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_daemon.minute.dispatch import MAX_DISPATCH_ATTEMPTS
from tests.agent_daemon.limited_child import run_script

pytestmark = pytest.mark.slow

_SCRIPT = """
import hashlib, json, sys
from datetime import timedelta
from pathlib import Path
from agent_daemon.connection.outbox import Outbox
from agent_daemon.host.status import AgentStatus, problems
from tests.agent_daemon.limited_child import full_disk
from tests.agent_daemon.minute.slot_world import SLOT_AT, make

root = Path(sys.argv[1])
installed, full_minutes, room_minutes = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
h, clock = make(root, at=SLOT_AT - timedelta(minutes=2))
h.updater.installed = installed
first = h.daemon.tick()

def files():
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*")) if p.is_file()
    }

before = files()
results = []
with full_disk():
    for minute in range(full_minutes):
        clock.set(SLOT_AT + timedelta(minutes=minute))
        results.append(h.daemon.tick())
    same_files = before == files()
for minute in range(full_minutes, full_minutes + room_minutes):
    clock.set(SLOT_AT + timedelta(minutes=minute))
    results.append(h.daemon.tick())
state = h.state()
status = AgentStatus(
    agent_id="a", control_url="http://control.test", daemon_pid=1, cached=None, state=state,
    pending_reports=Outbox(root / "outbox").count(), installed_version=installed,
    now=clock.now(),
)
print(json.dumps({
    "first": first,
    "results": results,
    "same_files": same_files,
    "applied": len(h.updater.applied),
    "requests": h.control_plane.requests,
    "runs": [[r.slot_key, r.status, r.reason] for r in h.control_plane.runs.values()],
    "outcomes": h.control_plane.outcome_bodies,
    "events": [[e["event"], e.get("level"), str(e.get("error", ""))] for e in h.events()],
    "last_consumed": None if state.last_consumed is None else state.last_consumed.key,
    "claim": None if state.claim is None else state.claim.run_id,
    "last_runs": [[r.slot_key, r.status, r.reason] for r in state.recent_runs],
    "problems": problems(status),
}))
"""

SLOT_KEY = "2026-11-30T03:00"


def _night(tmp_path: Path, *, installed: str, full: int, room: int = 0) -> dict[str, Any]:
    """The slot's minutes from 03:00: `full` of them on a full disk, then `room` with room."""
    found = run_script(_SCRIPT, str(tmp_path / "state"), installed, str(full), str(room))
    assert found["first"] == "no_slot"
    assert found["same_files"]
    names = [name for name, _, _ in found["events"]]
    assert "tick.crashed" not in names
    failed = [error for name, level, error in found["events"] if name == "tick.failed"]
    assert all("File too large" in error for error in failed)
    return found


def test_a_claim_the_full_disk_cannot_save_is_never_dispatched_and_ends_disk_full(
    tmp_path: Path,
) -> None:
    found = _night(tmp_path, installed="1.4.1", full=20)
    # Nothing handed to the updater: a dispatch whose claim is not on disk could be repeated or
    # lost after a restart.
    assert found["applied"] == 0
    # One claim (the grant is the claim, kept in memory), never asked for again.
    assert found["requests"].count("POST /v1/agent/claims") == 1
    # Tried again while the disk stayed full, then ended with its reason, reported once.
    waited = ["retrying"] * (MAX_DISPATCH_ATTEMPTS - 1)
    assert found["results"][:MAX_DISPATCH_ATTEMPTS] == [*waited, "dispatched"]
    assert set(found["results"][MAX_DISPATCH_ATTEMPTS:]) <= {"no_slot", "error"}
    assert found["runs"] == [[SLOT_KEY, "failed", "disk_full"]]
    [outcome] = found["outcomes"]
    assert outcome["reason"] == "disk_full"
    assert "could not be saved" in outcome["error"]
    assert "nothing was switched" in outcome["error"]
    events = found["events"]
    unsaved = [(level, error) for name, level, error in events if name == "claim.unsaved"]
    assert len(unsaved) == MAX_DISPATCH_ATTEMPTS
    assert all(level == "error" and "File too large" in error for level, error in unsaved)
    names = [name for name, _, _ in events]
    assert "update.dispatching" not in names
    assert names.count("update.failed") == 1
    assert "state.write_failed" in names
    assert "outbox.write_failed" in names


def test_a_claim_waits_for_the_disk_and_is_dispatched_once_it_has_room(tmp_path: Path) -> None:
    found = _night(tmp_path, installed="1.4.1", full=2, room=2)
    assert found["results"] == ["retrying", "retrying", "dispatched", "no_slot"]
    assert found["requests"].count("POST /v1/agent/claims") == 1
    assert found["applied"] == 1
    assert found["runs"] == [[SLOT_KEY, "succeeded", None]]
    assert found["last_consumed"] == SLOT_KEY
    assert found["claim"] is None
    assert found["last_runs"] == [[SLOT_KEY, "succeeded", None]]


def test_nothing_to_do_on_a_full_disk_is_reported_once_for_the_slot(tmp_path: Path) -> None:
    found = _night(tmp_path, installed="1.5.0", full=15)
    assert found["requests"].count("POST /v1/agent/runs") == 1
    assert found["runs"] == [[SLOT_KEY, "up_to_date", None]]
    assert found["results"][0] == "up_to_date"
    assert set(found["results"][1:]) <= {"no_slot", "error"}
    names = [name for name, _, _ in found["events"]]
    assert names.count("slot.up_to_date") == 1


def test_once_the_disk_has_room_status_shows_what_the_full_disk_held_back(tmp_path: Path) -> None:
    found = _night(tmp_path, installed="1.4.1", full=MAX_DISPATCH_ATTEMPTS, room=1)
    assert found["applied"] == 0
    assert found["last_consumed"] == SLOT_KEY
    assert found["claim"] is None
    assert found["last_runs"] == [[SLOT_KEY, "failed", "disk_full"]]
    [line] = [p for p in found["problems"] if p.startswith("the last run did not update")]
    assert "the disk was full" in line
    assert "could not be saved" in line
