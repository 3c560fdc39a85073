"""Switch to another build of the updater; commit it only once that build has checked in.

The order is what makes every crash recoverable without the new code:

1. `switch` writes `pending` (from, to, what `previous` named, a deadline, 0 attempts), then
   points `previous` at the running build and `current` at the new one, then asks systemd to
   restart the unit. Killed anywhere in between, the guard finds `pending` with `current` not yet
   at `to` (or at it) and either takes the switch back or lets the new build start.
2. The guard, before each start, counts the attempt in `pending`; past the limit, or past the
   deadline (also checked by its timer), it renames `pending` to `pending.rolling`, restores the
   links and writes `rolled_back`.
3. The new build, after a successful poll and a write of its state file, calls
   `commit_if_pending`: it renames `pending` to `pending.committing` and writes `committed`.

The two renames of `pending` are the one decision: whichever happens first wins, the other finds
the file gone and does nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent_daemon.disk.atomic_file import fsync_directory
from agent_daemon.errors import SelfUpdateError
from agent_daemon.self_update.own_builds import RunningBuild, own_builds_lock
from agent_daemon.self_update.switch_files import (
    PendingSwitch,
    SwitchFiles,
    SwitchRecord,
    read_fields,
    write_fields,
)
from agent_daemon.updater.layout import InstallLayout
from ground.whole_numbers import whole_number

__all__ = [
    "CHECK_IN_DEADLINE",
    "RESTART_UNIT_COMMAND",
    "SelfUpdateCheckIn",
    "SwitchReport",
    "SwitchRun",
    "clear_switch_outcome",
    "commit_if_pending",
    "note_started",
    "pending_switch",
    "read_switch_outcome",
    "read_switch_report",
    "switch",
    "take_switch_outcome",
]

# The new build's first minute polls within about a minute of its start; ten leave room for a
# slow start (resuming an interrupted update of the managed agent) and a few failed polls.
CHECK_IN_DEADLINE = timedelta(minutes=10)
# --no-block: the caller is the unit being restarted; waiting would wait for its own end.
RESTART_UNIT_COMMAND = ("systemctl", "restart", "--no-block", "nachtwacht-agent.service")


@dataclass(frozen=True, kw_only=True)
class SwitchRun:
    """The control plane's run a switch belongs to: its outcome is reported for this run."""

    run_id: str
    to_version: str
    # When the control plane allowed the switch (its clock): the report is judged at this instant.
    switched_at: datetime | None
    # The signed manifest's `manifest_version` and the id of the key that signed it: the updater
    # line's floor rises to it once the switch commits (`own_floor`).
    manifest_version: int | None = None
    signer: str | None = None

    def fields(self) -> dict[str, str]:
        at = "" if self.switched_at is None else str(int(self.switched_at.timestamp()))
        fields = {"run": self.run_id, "to": self.to_version, "switched_at": at}
        if self.manifest_version is not None and self.signer is not None:
            fields |= {"manifest_version": str(self.manifest_version), "signer": self.signer}
        return fields


@dataclass(frozen=True, kw_only=True)
class SwitchReport:
    """What became of a switch, and the run it belongs to (None: a switch made by hand)."""

    outcome: SwitchRecord
    run: SwitchRun | None


def pending_switch(state_dir: Path) -> PendingSwitch | None:
    files = SwitchFiles.under(state_dir)
    fields = read_fields(files.pending)
    return None if fields is None else PendingSwitch.from_fields(fields, path=files.pending)


def switch(
    *,
    own_root: Path,
    state_dir: Path,
    to_version: str,
    now: datetime,
    restart: Callable[[], None],
    deadline: timedelta = CHECK_IN_DEADLINE,
    run: SwitchRun | None = None,
) -> PendingSwitch:
    """Make `to_version` (installed, complete) the updater's `current` build, uncommitted, and
    restart the unit. Returns what was recorded; SelfUpdateError when it cannot be done.

    `now` is this host's clock, the one the guard compares the deadline with (`date +%s`). `run`,
    for a switch the daemon makes, is kept beside it for the report of its outcome."""
    with own_builds_lock(own_root):
        return _switch_locked(
            own_root=own_root,
            state_dir=state_dir,
            to_version=to_version,
            now=now,
            restart=restart,
            deadline=deadline,
            run=run,
        )


def _switch_locked(
    *,
    own_root: Path,
    state_dir: Path,
    to_version: str,
    now: datetime,
    restart: Callable[[], None],
    deadline: timedelta,
    run: SwitchRun | None,
) -> PendingSwitch:
    layout = InstallLayout(own_root)
    files = SwitchFiles.under(state_dir)
    if layout.complete_sha256(to_version) is None:
        raise SelfUpdateError(
            f"version: {to_version!r} is not a complete build under {layout.versions} "
            "(install it first)"
        )
    running = layout.link_target("current")
    if running is None:
        raise SelfUpdateError(f"{own_root / 'current'}: does not name a complete build")
    if running == to_version:
        raise SelfUpdateError(f"version: {to_version!r} is already the current build")
    for busy in (files.pending, files.rolling, files.committing):
        if busy.exists():
            raise SelfUpdateError(f"{busy}: a switch is still pending; wait for its outcome")
    pending = PendingSwitch(
        own_root=own_root,
        from_version=running,
        to_version=to_version,
        previous_before=layout.link_target("previous"),
        deadline=now + deadline,
    )
    files.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    files.started.unlink(missing_ok=True)
    # A new switch supersedes what became of the last one: `status` and the next start say
    # this switch's outcome, never an older rollback's.
    clear_switch_outcome(state_dir)
    if run is not None:
        write_fields(files.run, run.fields())
    # Before any link moves: from here on the guard can always find its way back.
    write_fields(files.pending, pending.fields())
    layout.point("previous", running)
    layout.point("current", to_version)
    restart()
    return pending


def note_started(state_dir: Path, running: RunningBuild | None) -> None:
    """Called by a daemon at start: the guard tells a build that never started (exited at start)
    from one that started and then kept dying (a crash loop)."""
    if running is None:
        return
    files = SwitchFiles.under(state_dir)
    pending = pending_switch(state_dir)
    if pending is None or pending.to_version != running.version:
        return
    write_fields(files.started, {"version": running.version})


def commit_if_pending(
    state_dir: Path, running: RunningBuild | None, *, now: datetime
) -> SwitchRecord | None:
    """Commit the pending switch when it is to the build running here; the caller has polled the
    control plane and written its state file. Returns the `committed` record, or None when there
    was nothing to commit (no switch, a switch to another build, or the guard came first)."""
    if running is None:
        return None
    files = SwitchFiles.under(state_dir)
    pending: PendingSwitch | None
    if files.committing.exists():
        # A commit killed after its rename: finish it.
        fields = read_fields(files.committing)
        pending = None if fields is None else PendingSwitch.from_fields(fields, path=files.pending)
    else:
        pending = pending_switch(state_dir)
        if pending is None or pending.to_version != running.version:
            return None
        try:
            os.rename(files.pending, files.committing)
        except FileNotFoundError:
            return None  # the guard took it back first; a restart into `from` follows
        fsync_directory(files.directory)
    if pending is None or pending.to_version != running.version:
        return None
    record = SwitchRecord(
        outcome="committed",
        failed_version=None,
        running_version=running.version,
        reason=None,
        at=now,
    )
    write_fields(
        files.committed,
        {
            "version": running.version,
            "from": pending.from_version,
            "at": str(int(now.timestamp())),
        },
    )
    files.started.unlink(missing_ok=True)
    files.committing.unlink(missing_ok=True)
    fsync_directory(files.directory)
    return record


def read_switch_outcome(state_dir: Path) -> SwitchRecord | None:
    """What became of the last switch, for the daemon's report: the guard's `rolled_back`
    record, else the `committed` one; None when neither is waiting. `clear_switch_outcome` once
    it was reported."""
    files = SwitchFiles.under(state_dir)
    fields = read_fields(files.rolled_back)
    if fields is not None:
        return SwitchRecord(
            outcome="rolled_back",
            failed_version=fields.get("failed") or None,
            running_version=fields.get("restored") or None,
            reason=fields.get("reason") or None,
            at=_instant(fields.get("at")),
        )
    fields = read_fields(files.committed)
    if fields is not None:
        return SwitchRecord(
            outcome="committed",
            failed_version=None,
            running_version=fields.get("version") or None,
            reason=None,
            at=_instant(fields.get("at")),
        )
    return None


def take_switch_outcome(state_dir: Path) -> SwitchRecord | None:
    """`read_switch_outcome`, then cleared: for a caller that has put it in the outbox (durable),
    so that it is reported once."""
    outcome = read_switch_outcome(state_dir)
    if outcome is not None:
        clear_switch_outcome(state_dir)
    return outcome


def read_switch_report(state_dir: Path) -> SwitchReport | None:
    """`read_switch_outcome` with the run it belongs to, when the daemon made the switch and the
    outcome is that switch's (a stale `run` of another build is not taken for it)."""
    outcome = read_switch_outcome(state_dir)
    if outcome is None:
        return None
    fields = read_fields(SwitchFiles.under(state_dir).run)
    rolled_back = outcome.outcome == "rolled_back"
    switched = outcome.failed_version if rolled_back else outcome.running_version
    if fields is None or not fields.get("run") or fields.get("to") != switched:
        return SwitchReport(outcome=outcome, run=None)
    manifest_version = fields.get("manifest_version", "")
    run = SwitchRun(
        run_id=fields["run"],
        to_version=fields["to"],
        switched_at=_instant(fields.get("switched_at")),
        manifest_version=whole_number(manifest_version),
        signer=fields.get("signer") or None,
    )
    return SwitchReport(outcome=outcome, run=run)


def clear_switch_outcome(state_dir: Path) -> None:
    files = SwitchFiles.under(state_dir)
    files.rolled_back.unlink(missing_ok=True)
    files.committed.unlink(missing_ok=True)
    files.run.unlink(missing_ok=True)
    if files.directory.is_dir():
        fsync_directory(files.directory)


def _instant(seconds: str | None) -> datetime | None:
    try:
        return None if not seconds else datetime.fromtimestamp(int(seconds), UTC)
    except ValueError:
        return None


@dataclass(frozen=True, kw_only=True)
class SelfUpdateCheckIn:
    """The daemon's side of a switch: which build it runs, where the switch's files are."""

    state_dir: Path
    running: RunningBuild | None

    def started(self) -> None:
        note_started(self.state_dir, self.running)

    def awaits_commit(self) -> bool:
        if self.running is None:
            return False
        files = SwitchFiles.under(self.state_dir)
        if files.committing.exists():
            return True
        pending = pending_switch(self.state_dir)
        return pending is not None and pending.to_version == self.running.version

    def commit(self, now: datetime) -> SwitchRecord | None:
        return commit_if_pending(self.state_dir, self.running, now=now)

    def report(self) -> SwitchReport | None:
        """What became of the last switch, to report; `clear` once it is in the outbox. Only the
        build the outcome left running reports it: a new build the guard has just taken back may
        still run a minute before its restart, and must not speak for the build restored."""
        if self.running is None:
            return None
        report = read_switch_report(self.state_dir)
        if report is None or report.outcome.running_version != self.running.version:
            return None
        return report

    def clear(self) -> None:
        clear_switch_outcome(self.state_dir)

    def switching_run(self) -> str | None:
        """The run of a switch still pending (its outcome not known yet), when the daemon made
        it: that run is not carried on by any build, it waits for the outcome."""
        files = SwitchFiles.under(self.state_dir)
        if not (files.pending.exists() or files.committing.exists()):
            return None
        fields = read_fields(files.run)
        return None if fields is None else fields.get("run") or None
