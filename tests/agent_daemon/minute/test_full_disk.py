"""A state directory on a full disk, for real: the daemon's minutes run in a process whose every
file write past 0 bytes fails (`RLIMIT_FSIZE`, which Python answers with `EFBIG` rather than a
signal), as every write on a full disk does. The minutes end, each failure is a line, the update
is applied once and reported, and not one file in the state directory changes — no half-written
file, no temporary file left behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

_SCRIPT = """
import hashlib, json, resource, sys
from datetime import timedelta
from pathlib import Path
from tests.agent_daemon.minute.slot_world import SLOT_AT, make

root = Path(sys.argv[1])
h, clock = make(root, at=SLOT_AT - timedelta(minutes=2))
first = h.daemon.tick()

def files():
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*")) if p.is_file()
    }

before = files()
resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))
results = []
for minute in range(5):
    clock.set(SLOT_AT + timedelta(minutes=minute))
    results.append(h.daemon.tick())
after = files()
print(json.dumps({
    "first": first,
    "results": results,
    "same_files": before == after,
    "applied": len(h.updater.applied),
    "runs": [[r.slot_key, r.status] for r in h.control_plane.runs.values()],
    "events": [[e["event"], e.get("level"), str(e.get("error", ""))] for e in h.events()],
}))
"""


def test_a_full_state_directory_changes_no_file_and_loses_no_report(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path / "state")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parents[3],
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["first"] == "no_slot"
    # The update went ahead (its claim kept in memory), once; later minutes fail to save and say
    # so, and never raise.
    assert found["results"][0] == "dispatched"
    assert set(found["results"][1:]) <= {"error", "no_slot"}
    assert found["applied"] == 1
    assert found["runs"] == [["2026-11-30T03:00", "succeeded"]]
    assert found["same_files"]
    events = found["events"]
    names = [name for name, _, _ in events]
    assert "state.write_failed" in names
    assert "outbox.write_failed" in names
    assert [name for name in names if name.startswith("update.s")] == ["update.succeeded"]
    failed = [error for name, level, error in events if name == "tick.failed"]
    assert all("File too large" in error for error in failed)
    assert "tick.crashed" not in names
