"""The guard script on its own: the files a switch leaves, and what the guard makes of them. Its
builds are folders with `.complete` (the guard never runs one); the end-to-end cases with real
builds and daemons are in test_own_build_switch."""

from __future__ import annotations

import os
import stat
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent_daemon.self_update.own_builds import RunningBuild
from agent_daemon.self_update.pending_switch import (
    commit_if_pending,
    note_started,
    pending_switch,
    read_switch_outcome,
    switch,
    take_switch_outcome,
)
from agent_daemon.self_update.switch_files import SwitchFiles, read_fields, write_fields
from agent_daemon.updater.layout import InstallLayout
from tests.agent_daemon.self_update.own_build_kit import GUARD, NEW, OLD, OLDER, links, run_guard


def switched(
    layout: InstallLayout, state_dir: Path, *, deadline: timedelta = timedelta(minutes=10)
) -> list[str]:
    restarts: list[str] = []
    switch(
        own_root=layout.root,
        state_dir=state_dir,
        to_version=NEW,
        now=datetime.now(UTC),
        restart=lambda: restarts.append("restart"),
        deadline=deadline,
    )
    return restarts


def test_switch_records_before_it_moves_the_links_and_restarts(
    layout: InstallLayout, state_dir: Path
) -> None:
    assert switched(layout, state_dir) == ["restart"]
    assert links(layout) == (NEW, OLD)
    pending = pending_switch(state_dir)
    assert pending is not None
    assert (pending.from_version, pending.to_version, pending.previous_before) == (
        OLD,
        NEW,
        OLDER,
    )
    assert pending.attempts == 0


def test_starts_within_the_limit_are_counted_and_leave_the_new_build_current(
    layout: InstallLayout, state_dir: Path
) -> None:
    switched(layout, state_dir)
    for attempt in (1, 2, 3):
        done = run_guard("pre-start", state_dir)
        assert done.returncode == 0, done.stderr
        pending = pending_switch(state_dir)
        assert pending is not None and pending.attempts == attempt
        assert links(layout) == (NEW, OLD)


@pytest.mark.parametrize(
    ("started", "reason"),
    [
        pytest.param(False, "exited_at_start", id="never_started"),
        pytest.param(True, "crash_loop", id="started_then_died"),
    ],
)
def test_the_start_past_the_limit_goes_back_to_the_build_before(
    layout: InstallLayout, state_dir: Path, started: bool, reason: str
) -> None:
    switched(layout, state_dir)
    if started:
        note_started(state_dir, RunningBuild(own_root=layout.root, version=NEW))
    for _ in range(4):
        assert run_guard("pre-start", state_dir).returncode == 0
    assert links(layout) == (OLD, OLDER)
    outcome = read_switch_outcome(state_dir)
    assert outcome is not None
    assert (outcome.outcome, outcome.reason, outcome.failed_version, outcome.running_version) == (
        "rolled_back",
        reason,
        NEW,
        OLD,
    )
    files = SwitchFiles.under(state_dir)
    assert not files.pending.exists() and not files.rolling.exists()
    assert not files.started.exists()


def test_a_switch_killed_before_current_moved_is_undone_at_the_next_start(
    layout: InstallLayout, state_dir: Path
) -> None:
    switched(layout, state_dir)
    # As if killed after `previous` moved and before `current` did.
    layout.point("current", OLD)
    assert run_guard("pre-start", state_dir).returncode == 0
    assert links(layout) == (OLD, OLDER)
    outcome = read_switch_outcome(state_dir)
    assert outcome is not None and outcome.reason == "switch_interrupted"


def test_the_timer_goes_back_after_the_deadline_and_restarts_the_unit(
    layout: InstallLayout, state_dir: Path, tmp_path: Path
) -> None:
    switched(layout, state_dir, deadline=timedelta(seconds=-1))
    note_started(state_dir, RunningBuild(own_root=layout.root, version=NEW))
    restarted = tmp_path / "restarted"
    done = run_guard("check", state_dir, "--restart", f"touch {restarted}")
    assert done.returncode == 0, done.stderr
    assert links(layout) == (OLD, OLDER)
    assert restarted.exists()
    outcome = read_switch_outcome(state_dir)
    assert outcome is not None and outcome.reason == "never_checked_in"
    assert "did not check in (never_checked_in): back to 1.0.0" in done.stderr


def test_the_timer_leaves_a_switch_inside_its_deadline(
    layout: InstallLayout, state_dir: Path, tmp_path: Path
) -> None:
    switched(layout, state_dir)
    restarted = tmp_path / "restarted"
    assert run_guard("check", state_dir, "--restart", f"touch {restarted}").returncode == 0
    assert links(layout) == (NEW, OLD)
    assert not restarted.exists()
    assert pending_switch(state_dir) is not None


def test_a_committed_switch_is_never_taken_back(layout: InstallLayout, state_dir: Path) -> None:
    switched(layout, state_dir, deadline=timedelta(seconds=-1))
    running = RunningBuild(own_root=layout.root, version=NEW)
    committed = commit_if_pending(state_dir, running, now=datetime.now(UTC))
    assert committed is not None and committed.outcome == "committed"
    assert run_guard("check", state_dir, "--restart", "false").returncode == 0
    assert run_guard("pre-start", state_dir).returncode == 0
    assert links(layout) == (NEW, OLD)
    outcome = read_switch_outcome(state_dir)
    assert outcome is not None and outcome.outcome == "committed"


def test_the_old_build_never_commits_a_switch_to_the_new_one(
    layout: InstallLayout, state_dir: Path
) -> None:
    switched(layout, state_dir)
    running = RunningBuild(own_root=layout.root, version=OLD)
    assert commit_if_pending(state_dir, running, now=datetime.now(UTC)) is None
    assert pending_switch(state_dir) is not None


def test_a_commit_killed_after_its_rename_is_finished_by_the_next_poll(
    layout: InstallLayout, state_dir: Path
) -> None:
    switched(layout, state_dir)
    files = SwitchFiles.under(state_dir)
    os.rename(files.pending, files.committing)
    # The guard sees no pending switch: the new build had checked in.
    assert run_guard("pre-start", state_dir).returncode == 0
    assert links(layout) == (NEW, OLD)
    running = RunningBuild(own_root=layout.root, version=NEW)
    assert commit_if_pending(state_dir, running, now=datetime.now(UTC)) is not None
    assert not files.committing.exists()
    assert files.committed.exists()


def test_a_guard_killed_in_the_middle_of_a_rollback_finishes_it_next_time(
    layout: InstallLayout, state_dir: Path, tmp_path: Path
) -> None:
    switched(layout, state_dir, deadline=timedelta(seconds=-1))
    # `sync` runs right after the links are restored: a `sync` that kills the guard (-9) there.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    killer = bin_dir / "sync"
    killer.write_text("#!/bin/sh\nkill -9 $PPID\n")
    killer.chmod(killer.stat().st_mode | stat.S_IXUSR)
    env_path = f"{bin_dir}:{os.environ['PATH']}"
    killed = subprocess.run(
        ["sh", str(GUARD), "check", "--state-dir", str(state_dir), "--restart", ""],
        env={**os.environ, "PATH": env_path},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert killed.returncode == -9
    files = SwitchFiles.under(state_dir)
    assert files.rolling.exists() and not files.rolled_back.exists()

    assert run_guard("pre-start", state_dir).returncode == 0
    assert links(layout) == (OLD, OLDER)
    assert not files.rolling.exists()
    outcome = read_switch_outcome(state_dir)
    # Its reason survives the kill: written before the links moved (the new build never started).
    assert outcome is not None and outcome.reason == "exited_at_start"


def test_a_pending_file_of_another_format_is_left_alone(
    layout: InstallLayout, state_dir: Path
) -> None:
    switched(layout, state_dir)
    files = SwitchFiles.under(state_dir)
    fields = read_fields(files.pending)
    assert fields is not None
    files.pending.write_text("format=2\n" + "".join(f"{k}={v}\n" for k, v in fields.items()))
    done = run_guard("pre-start", state_dir)
    assert done.returncode == 2
    assert "pending: format: expected 1, found '2'" in done.stderr
    assert links(layout) == (NEW, OLD)


def test_a_pending_file_naming_a_path_instead_of_a_version_is_refused(
    layout: InstallLayout, state_dir: Path
) -> None:
    switched(layout, state_dir, deadline=timedelta(seconds=-1))
    files = SwitchFiles.under(state_dir)
    fields = read_fields(files.pending)
    assert fields is not None
    write_fields(files.pending, {**fields, "from": "../../etc"})
    done = run_guard("check", state_dir, "--restart", "false")
    assert done.returncode == 2
    assert "from: '../../etc' is not a version" in done.stderr
    assert layout.link_target("current") == NEW


def test_nothing_switched_nothing_done(state_dir: Path) -> None:
    done = run_guard("pre-start", state_dir)
    assert done.returncode == 0 and done.stderr == ""
    assert not (state_dir / "self-update").exists()


def test_the_outcome_is_taken_once_for_the_report(layout: InstallLayout, state_dir: Path) -> None:
    switched(layout, state_dir, deadline=timedelta(seconds=-1))
    assert run_guard("check", state_dir, "--restart", "").returncode == 0
    taken = take_switch_outcome(state_dir)
    assert taken is not None and taken.outcome == "rolled_back"
    assert take_switch_outcome(state_dir) is None


def test_a_new_switch_supersedes_the_last_ones_rollback(
    layout: InstallLayout, state_dir: Path
) -> None:
    # Rolled back by the guard, never reported: the next switch's outcome must not be hidden
    # behind it (`status` and the start both read the rollback first).
    switched(layout, state_dir, deadline=timedelta(seconds=-1))
    assert run_guard("check", state_dir, "--restart", "").returncode == 0
    rolled_back = read_switch_outcome(state_dir)
    assert rolled_back is not None and rolled_back.outcome == "rolled_back"
    switched(layout, state_dir)
    assert read_switch_outcome(state_dir) is None
    assert pending_switch(state_dir) is not None
