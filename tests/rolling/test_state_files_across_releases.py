"""The state directory's files across a switch of the updater's own build, one release back and
forth: this release reads what the previous release wrote, the previous release reads what this
one writes, and this one reads a file of the next release (a field it does not know). The previous
release's code writes and reads its files itself (a subprocess on its tree)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_daemon.connection.outbox import Outbox, Report
from agent_daemon.disk.daemon_state import ClaimInProgress, ConsumedSlot, DaemonState, StateStore
from agent_daemon.errors import DaemonStateError
from agent_daemon.updater.updater_state import UpdaterState, UpdaterStateStore
from ground.contract import OutcomeReason
from nachtwacht.demo_world.children import Subprocesses

AT = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)

# Both releases build the same states from the same names: the fields the previous release knows.
_BUILD_STATES = """
from datetime import UTC, datetime
from agent_daemon.disk.daemon_state import ClaimInProgress, ConsumedSlot, DaemonState, RunRecord
from agent_daemon.updater.updater_state import Build, InProgress, RecordedOutcome, UpdaterState

AT = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
DAEMON = DaemonState(
    last_consumed=ConsumedSlot(key="2026-11-30T03:00", at=AT),
    claim=ClaimInProgress(
        run_id="run-1", trigger="schedule", slot_key="2026-11-30T03:00", release_version="1.5.0",
        manifest_b64="bWFuaWZlc3Q=", signature_b64="c2ln", artifact_url="https://a.example/x",
        claimed_at=AT, phase="dispatching", attempts=2, window_closes_at=AT, token_expires_at=AT,
        last_reason="platform_unavailable", last_error="503",
    ),
    handled_manual_runs=("run-0",),
    recent_runs=(RunRecord(at=AT, trigger="schedule", slot_key="2026-11-30T03:00",
                           run_id="run-0", status="succeeded", version="1.4.0"),),
)
UPDATER = UpdaterState(
    floor=7, floors={"key-a": 7},
    builds={"1.4.0": Build(manifest_version=7, issued_at=AT, sha256="ab" * 32)},
    bad_versions={"1.3.0": "2026-11-29T03:00:00Z: health check failed"},
    in_progress=InProgress(
        run_id="run-1", step="switching", version="1.5.0", manifest_b64="bWFuaWZlc3Q=",
        signature_b64="c2ln", artifact_url="https://a.example/x", from_version="1.4.0",
        previous_before="1.3.0", attempts=1, switched_at=AT,
    ),
    last_outcome=RecordedOutcome(run_id="run-0", status="succeeded", version="1.4.0", error=None),
)
"""

_PREVIOUS_WRITES = (
    _BUILD_STATES
    + """
import sys
from pathlib import Path
from agent_daemon.connection.outbox import Outbox, Report
from agent_daemon.disk.daemon_state import StateStore
from agent_daemon.updater.updater_state import UpdaterStateStore

state_dir = Path(sys.argv[1])
StateStore(state_dir / "state.json").save(DAEMON)
UpdaterStateStore(state_dir / "updater").save(UPDATER)
Outbox(state_dir / "outbox").put(
    Report(method="PATCH", path="/v1/agent/runs/run-0", body={"status": "succeeded"},
           slot_key="2026-11-30T03:00", run_id="run-0")
)
"""
)

_PREVIOUS_READS = (
    _BUILD_STATES
    + """
import sys
from pathlib import Path
from agent_daemon.connection.outbox import Outbox
from agent_daemon.disk.daemon_state import StateStore
from agent_daemon.updater.updater_state import UpdaterStateStore

state_dir = Path(sys.argv[1])
assert StateStore(state_dir / "state.json").load() == DAEMON, "daemon state"
assert UpdaterStateStore(state_dir / "updater").load() == UPDATER, "updater state"
(report,) = Outbox(state_dir / "outbox").pending()
assert report.run_id == "run-0" and report.body == {"status": "succeeded"}, report
print("read")
"""
)


def _states() -> tuple[DaemonState, UpdaterState]:
    namespace: dict[str, object] = {}
    # The very text the previous release runs, so both build the same states.
    exec(_BUILD_STATES, namespace)  # noqa: S102
    daemon, updater = namespace["DAEMON"], namespace["UPDATER"]
    assert isinstance(daemon, DaemonState) and isinstance(updater, UpdaterState)
    return daemon, updater


def _previous(
    previous_release: Subprocesses, script: str, state_dir: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, str(state_dir)],
        env=previous_release.environment(),
        cwd=previous_release.checkout,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_this_release_reads_what_the_previous_one_wrote(
    previous_release: Subprocesses, tmp_path: Path
) -> None:
    written = _previous(previous_release, _PREVIOUS_WRITES, tmp_path)
    assert written.returncode == 0, written.stderr
    daemon, updater = _states()
    assert StateStore(tmp_path / "state.json").load() == daemon
    assert UpdaterStateStore(tmp_path / "updater").load() == updater
    (report,) = Outbox(tmp_path / "outbox").pending()
    assert (report.run_id, report.body) == ("run-0", {"status": "succeeded"})


@pytest.mark.slow
def test_the_previous_release_reads_what_this_one_wrote(
    previous_release: Subprocesses, tmp_path: Path
) -> None:
    daemon, updater = _states()
    StateStore(tmp_path / "state.json").save(daemon)
    UpdaterStateStore(tmp_path / "updater").save(updater)
    Outbox(tmp_path / "outbox").put(
        Report(
            method="PATCH",
            path="/v1/agent/runs/run-0",
            body={"status": "succeeded"},
            slot_key="2026-11-30T03:00",
            run_id="run-0",
        )
    )
    read = _previous(previous_release, _PREVIOUS_READS, tmp_path)
    assert read.returncode == 0, read.stderr
    assert read.stdout.strip() == "read"


def _with_unknown_fields(path: Path, *nested: str) -> None:
    document = json.loads(path.read_text())
    document["added_by_the_next_release"] = {"anything": [1, 2]}
    for name in nested:
        document[name]["added_by_the_next_release"] = "x"
    path.write_text(json.dumps(document))


def test_this_release_reads_the_next_ones_files_ignoring_fields_it_does_not_know(
    tmp_path: Path,
) -> None:
    daemon, updater = _states()
    store = StateStore(tmp_path / "state.json")
    store.save(daemon)
    _with_unknown_fields(store.path, "claim", "last_consumed")
    updater_store = UpdaterStateStore(tmp_path / "updater")
    updater_store.save(updater)
    _with_unknown_fields(updater_store.path, "in_progress", "last_outcome")

    assert store.load() == daemon
    assert updater_store.load() == updater


def test_a_claim_read_from_the_next_release_is_the_same_claim(tmp_path: Path) -> None:
    claim = ClaimInProgress(
        run_id="run-9",
        trigger="manual",
        slot_key=None,
        release_version="2.0.0",
        manifest_b64="bQ==",
        signature_b64="cw==",
        artifact_url="https://a.example/y",
        claimed_at=AT,
    )
    store = StateStore(tmp_path / "state.json")
    store.save(DaemonState(claim=claim, last_consumed=ConsumedSlot(key="k", at=AT)))
    _with_unknown_fields(store.path, "claim")
    assert store.load().claim == claim


def test_a_state_of_a_newer_format_is_still_refused(tmp_path: Path) -> None:
    store = UpdaterStateStore(tmp_path)
    store.save(UpdaterState(floor=1, builds={}, in_progress=None))
    document = json.loads(store.path.read_text())
    document["format_version"] = 2
    store.path.write_text(json.dumps(document))
    with pytest.raises(DaemonStateError, match="written by a newer nachtwacht agent"):
        store.load()


def test_a_reason_the_next_release_added_reads_as_none_not_an_unusable_state(
    tmp_path: Path,
) -> None:
    """The next release may end or retry a run with a reason this one does not know: its state
    files must still read (an unreadable updater state stops every later update on the host),
    with the reason unknown."""
    daemon, updater = _states()
    assert daemon.claim is not None and updater.last_outcome is not None
    store = StateStore(tmp_path / "state.json")
    store.save(daemon)
    document = json.loads(store.path.read_text())
    document["claim"]["last_reason"] = "quota_exceeded"
    store.path.write_text(json.dumps(document))
    updater_store = UpdaterStateStore(tmp_path / "updater")
    updater_store.save(updater)
    document = json.loads(updater_store.path.read_text())
    document["last_outcome"]["reason"] = "quota_exceeded"
    updater_store.path.write_text(json.dumps(document))

    assert store.load() == daemon.model_copy(
        update={"claim": daemon.claim.model_copy(update={"last_reason": None})}
    )
    assert updater_store.load() == updater.model_copy(
        update={"last_outcome": updater.last_outcome.model_copy(update={"reason": None})}
    )


@pytest.mark.parametrize("reason", [7, ["interrupted"], {"x": 1}])
def test_a_reason_that_is_not_text_still_makes_the_state_unusable(
    tmp_path: Path, reason: object
) -> None:
    # Not a newer release's word but a damaged file: refused, naming the field.
    daemon, _ = _states()
    store = StateStore(tmp_path / "state.json")
    store.save(daemon)
    document = json.loads(store.path.read_text())
    document["claim"]["last_reason"] = reason
    store.path.write_text(json.dumps(document))
    with pytest.raises(DaemonStateError, match="last_reason"):
        store.load()


def _ended_for_a_closed_window(updater: UpdaterState) -> UpdaterState:
    assert updater.last_outcome is not None
    ended = updater.last_outcome.model_copy(
        update={"status": "failed", "reason": OutcomeReason.WINDOW_CLOSED, "switched_at": None}
    )
    return updater.model_copy(update={"last_outcome": ended})


def test_a_run_ended_for_a_closed_window_is_kept_in_the_previous_release_s_words(
    tmp_path: Path,
) -> None:
    # A failed run's outcome is never answered again from the file: the older word loses nothing.
    _, updater = _states()
    store = UpdaterStateStore(tmp_path / "updater")
    store.save(_ended_for_a_closed_window(updater))
    loaded = store.load()
    assert loaded.last_outcome is not None
    assert (loaded.last_outcome.status, loaded.last_outcome.reason) == ("failed", "interrupted")


_PREVIOUS_READS_UPDATER = """
import sys
from pathlib import Path
from agent_daemon.updater.updater_state import UpdaterStateStore

state = UpdaterStateStore(Path(sys.argv[1]) / "updater").load()
print(state.last_outcome.status, state.last_outcome.reason.value)
"""


@pytest.mark.slow
def test_the_previous_release_reads_a_run_this_one_ended_for_a_closed_window(
    previous_release: Subprocesses, tmp_path: Path
) -> None:
    """The updater's last outcome stays in its file until the next update ends; the previous
    release, switched back to, must still read the file (it refuses a reason it does not know)."""
    _, updater = _states()
    UpdaterStateStore(tmp_path / "updater").save(_ended_for_a_closed_window(updater))
    read = _previous(previous_release, _PREVIOUS_READS_UPDATER, tmp_path)
    assert read.returncode == 0, read.stderr
    assert read.stdout.strip() == "failed interrupted"
