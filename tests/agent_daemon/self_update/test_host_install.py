"""The host's `SelfInstall`: a verified bundle unpacked with the build rules, installed beside the
running build, switched to with its run kept, the unit restarted by a command; every failure before
the switch leaves the running build as it was. And the switch's outcome as the daemon reads it for
the report: only for the run of that switch."""

from __future__ import annotations

import io
import os
import sys
import tarfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent_daemon.commands.status_cli import _self_update_line
from agent_daemon.disk.pid_lock import PidLock
from agent_daemon.errors import SelfUpdateError, UpdateInProgress
from agent_daemon.minute.own_switch import switch_outcome
from agent_daemon.self_update.host_install import HostSelfInstall
from agent_daemon.self_update.own_builds import (
    OWN_BUILDS_LOCK_NAME,
    RunningBuild,
    install_build,
    running_build,
)
from agent_daemon.self_update.pending_switch import (
    SelfUpdateCheckIn,
    SwitchRun,
    pending_switch,
    read_switch_report,
)
from agent_daemon.self_update.switch_files import SwitchFiles, read_fields, write_fields
from agent_daemon.updater.failure_reasons import failure_reason
from agent_daemon.updater.layout import InstallLayout
from ground.contract import OutcomeReason
from signed_release.versions import version_key
from tests.agent_daemon.self_update.own_build_kit import NEW, OLD, bundle_bytes, make_wheel

RUN = SwitchRun(
    run_id="7d5c3a52-57f5-4bb4-9b0a-2b6f0f0c8e11",
    to_version=NEW,
    switched_at=datetime(2026, 11, 30, 2, 1, tzinfo=UTC),
)


def _host(
    layout: InstallLayout, state_dir: Path, *, restart_command: tuple[str, ...] = ("false",)
) -> HostSelfInstall:
    return HostSelfInstall(
        own_root=layout.root,
        state_dir=state_dir,
        python=sys.executable,
        restart_command=restart_command,
    )


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _tar(members: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _untouched(layout: InstallLayout, state_dir: Path) -> None:
    assert layout.link_target("current") == OLD
    assert pending_switch(state_dir) is None
    assert not SwitchFiles.under(state_dir).run.exists()


def test_a_bundle_with_a_member_outside_it_is_refused_and_nothing_is_written(
    layout: InstallLayout, state_dir: Path, tmp_path: Path
) -> None:
    staging = tmp_path / "staging"
    staging.mkdir()
    bundle = _write(
        staging / "bundle.tar.gz",
        _tar([("b/wheels/x.whl", b"w"), ("../../escaped", b"owned")]),
    )
    with pytest.raises(SelfUpdateError, match=r"archive refused for the updater 1\.1\.0"):
        _host(layout, state_dir).install(bundle, "1.1.0", unpacked_size=10_000)
    assert not (tmp_path / "escaped").exists()
    assert not any(staging.glob(".unpacked-*"))
    assert "1.1.0" not in layout.installed_versions()
    _untouched(layout, state_dir)


def test_a_bundle_larger_than_its_signed_size_is_refused(
    layout: InstallLayout, state_dir: Path, tmp_path: Path
) -> None:
    bundle = _write(tmp_path / "bundle.tar.gz", _tar([("b/wheels/x.whl", b"w" * 4096)]))
    with pytest.raises(SelfUpdateError, match="unpacked_size"):
        _host(layout, state_dir).install(bundle, "1.1.0", unpacked_size=100)
    _untouched(layout, state_dir)


def test_a_bundle_without_wheels_or_not_a_tar_is_refused(
    layout: InstallLayout, state_dir: Path, tmp_path: Path
) -> None:
    no_wheels = _write(tmp_path / "a.tar.gz", _tar([("b/install.sh", b"#!/bin/sh\n")]))
    with pytest.raises(SelfUpdateError, match=r"expected one folder holding wheels/, found 0"):
        _host(layout, state_dir).install(no_wheels, "1.1.0", unpacked_size=10_000)
    not_tar = _write(tmp_path / "b.tar.gz", b"not a tar at all")
    with pytest.raises(SelfUpdateError, match=r"cannot unpack b\.tar\.gz"):
        _host(layout, state_dir).install(not_tar, "1.1.0", unpacked_size=10_000)
    _untouched(layout, state_dir)


def test_a_bundle_whose_wheel_is_another_version_is_refused(
    layout: InstallLayout, state_dir: Path, tmp_path: Path
) -> None:
    wheel = make_wheel(tmp_path / "wheels", "1.2.0", "good")
    bundle = _write(tmp_path / "bundle.tar.gz", bundle_bytes(wheel, "1.2.0"))
    with pytest.raises(SelfUpdateError, match=r"expected one nachtwacht_agent-1\.1\.0-\*\.whl"):
        _host(layout, state_dir).install(bundle, "1.1.0", unpacked_size=10**7)
    _untouched(layout, state_dir)


def test_a_good_bundle_is_installed_beside_then_switched_to_with_its_run_kept(
    layout: InstallLayout, state_dir: Path, tmp_path: Path
) -> None:
    wheel = make_wheel(tmp_path / "wheels", "1.1.0", "good")
    staging = tmp_path / "staging"
    staging.mkdir()
    bundle = _write(staging / "bundle.tar.gz", bundle_bytes(wheel, "1.1.0"))
    restarted = tmp_path / "restarted"
    host = _host(layout, state_dir, restart_command=("touch", str(restarted)))

    host.install(bundle, "1.1.0", unpacked_size=10**7)
    # Installed, not switched: the running build is untouched until `switch`.
    assert layout.complete_sha256("1.1.0") is not None
    assert not any(staging.glob(".unpacked-*"))
    _untouched(layout, state_dir)

    before = datetime.now(UTC)
    host.switch(
        "1.1.0", SwitchRun(run_id=RUN.run_id, to_version="1.1.0", switched_at=RUN.switched_at)
    )
    assert layout.link_target("current") == "1.1.0"
    assert layout.link_target("previous") == OLD
    pending = pending_switch(state_dir)
    assert pending is not None and (pending.from_version, pending.to_version) == (OLD, "1.1.0")
    # On this host's clock, which the guard reads: never the product clock.
    assert (
        before + timedelta(minutes=9)
        < pending.deadline
        <= datetime.now(UTC) + timedelta(minutes=10)
    )
    run = read_fields(SwitchFiles.under(state_dir).run)
    assert RUN.switched_at is not None
    at = str(int(RUN.switched_at.timestamp()))
    assert run == {"run": RUN.run_id, "to": "1.1.0", "switched_at": at}
    assert not restarted.exists()
    host.restart()
    assert restarted.exists()


def test_a_restart_command_that_fails_says_which_and_what_follows(
    layout: InstallLayout, state_dir: Path
) -> None:
    host = _host(layout, state_dir, restart_command=("sh", "-c", "echo nope >&2; exit 4"))
    with pytest.raises(SelfUpdateError, match=r"exited 4: nope \(the switch stays pending"):
        host.restart()


def _rolled_back(state_dir: Path, *, failed: str, reason: str) -> None:
    files = SwitchFiles.under(state_dir)
    files.directory.mkdir(parents=True, exist_ok=True)
    write_fields(
        files.rolled_back,
        {"failed": failed, "restored": OLD, "reason": reason, "at": "1795831300"},
    )


def test_the_report_of_a_rollback_names_the_run_and_the_guards_word(state_dir: Path) -> None:
    _rolled_back(state_dir, failed=NEW, reason="crash_loop")
    write_fields(SwitchFiles.under(state_dir).run, RUN.fields())

    report = read_switch_report(state_dir)
    assert report is not None and report.run == RUN
    outcome = switch_outcome(report)
    assert outcome is not None
    assert (outcome.status, outcome.version, outcome.reason, outcome.run_id) == (
        "rolled_back",
        OLD,
        OutcomeReason.HEALTH_CHECK_FAILED,
        RUN.run_id,
    )
    assert outcome.switched_at == RUN.switched_at
    assert outcome.error is not None and "(crash_loop)" in outcome.error


def test_an_interrupted_switch_is_reported_failed_not_rolled_back(state_dir: Path) -> None:
    _rolled_back(state_dir, failed=NEW, reason="switch_interrupted")
    write_fields(SwitchFiles.under(state_dir).run, RUN.fields())
    report = read_switch_report(state_dir)
    assert report is not None
    outcome = switch_outcome(report)
    assert outcome is not None
    assert (outcome.status, outcome.reason, outcome.switched_at) == (
        "failed",
        OutcomeReason.INTERRUPTED,
        None,
    )


def test_a_run_file_of_another_switch_is_not_taken_for_this_outcome(state_dir: Path) -> None:
    # A switch to 1.2.0 by hand after the daemon's to 2.0.0 left its run file behind.
    _rolled_back(state_dir, failed="1.2.0", reason="exited_at_start")
    write_fields(SwitchFiles.under(state_dir).run, RUN.fields())
    report = read_switch_report(state_dir)
    assert report is not None and report.run is None
    assert switch_outcome(report) is None


def test_only_the_build_a_rollback_restored_reports_it(state_dir: Path, tmp_path: Path) -> None:
    # The new build the guard took back may tick once more before its restart.
    _rolled_back(state_dir, failed=NEW, reason="never_checked_in")
    write_fields(SwitchFiles.under(state_dir).run, RUN.fields())
    own_root = tmp_path / "own"
    new = SelfUpdateCheckIn(
        state_dir=state_dir, running=RunningBuild(own_root=own_root, version=NEW)
    )
    old = SelfUpdateCheckIn(
        state_dir=state_dir, running=RunningBuild(own_root=own_root, version=OLD)
    )
    assert new.report() is None
    report = old.report()
    assert report is not None and report.run == RUN


def test_a_daemon_not_run_from_an_own_build_says_in_one_line_why_it_does_not_update_itself(
    tmp_path: Path,
) -> None:
    line = _self_update_line(running_build(str(tmp_path / "some-venv")))
    assert line.startswith("self-update: off, not installed as one of the updater's own builds")
    assert "\n" not in line
    own = tmp_path / "own" / "versions" / "1.0.0" / "venv"
    own.mkdir(parents=True)
    line = _self_update_line(running_build(str(own)))
    assert line == (
        f"self-update: on, nachtwacht's own agent 1.0.0 from {tmp_path / 'own/versions/1.0.0'}"
    )


def test_installing_a_build_removes_older_builds_but_never_current_or_previous(
    tmp_path: Path,
) -> None:
    """Four self-updates leave at most three builds: the new one, `current` and `previous`."""
    layout = InstallLayout(tmp_path / "own")
    layout.ensure()
    for version in ("0.7.0", "0.8.0", "0.9.0"):
        folder = layout.version_dir(version)
        folder.mkdir()
        (folder / ".complete").write_text("0" * 64 + "\n")
    layout.point("previous", "0.7.0")
    layout.point("current", "0.9.0")
    wheels = tmp_path / "wheels"
    make_wheel(wheels, NEW, "good")
    install_build(own_root=layout.root, wheels=wheels, version=NEW, python=sys.executable)
    assert layout.installed_versions() == sorted(["0.7.0", "0.9.0", NEW], key=version_key)
    assert (layout.link_target("current"), layout.link_target("previous")) == ("0.9.0", "0.7.0")


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(b"not a zip at all", id="wheel_not_a_zip"),
        pytest.param(b"", id="wheel_empty_as_on_a_full_disk"),
    ],
)
def test_a_build_that_fails_to_install_leaves_no_half_made_venv_behind(
    tmp_path: Path, broken: bytes
) -> None:
    """pip failing halfway (a wheel cut short when the disk filled): the half-made venv in
    `versions/.<v>.tmp` is removed at once, not left to hold the full disk until a later
    self-update; `current`, `previous` and the builds are as they were."""
    layout = InstallLayout(tmp_path / "own")
    layout.ensure()
    for version in ("0.9.0", OLD):
        folder = layout.version_dir(version)
        folder.mkdir()
        (folder / ".complete").write_text("0" * 64 + "\n")
    layout.point("previous", "0.9.0")
    layout.point("current", OLD)
    before = sorted(p.name for p in layout.versions.iterdir())
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / f"nachtwacht_agent-{NEW}-py3-none-any.whl").write_bytes(broken)

    with pytest.raises(SelfUpdateError, match="pip install"):
        install_build(own_root=layout.root, wheels=wheels, version=NEW, python=sys.executable)

    assert _builds(layout) == before
    assert (layout.link_target("current"), layout.link_target("previous")) == (OLD, "0.9.0")


def _builds(layout: InstallLayout) -> list[str]:
    """What `versions/` holds, but the lock of one install at a time."""
    return sorted(p.name for p in layout.versions.iterdir() if p.name != OWN_BUILDS_LOCK_NAME)


def test_an_install_or_a_switch_while_another_is_under_way_is_refused_and_changes_nothing(
    tmp_path: Path, state_dir: Path
) -> None:
    """The daemon installing at a slot and an admin's `self-update install` or `switch` at the
    same moment: the second is refused at once, naming the holder, and touches nothing — it
    could otherwise remove the first's half-made build, or the build the first switches to."""
    layout = InstallLayout(tmp_path / "own")
    layout.ensure()
    for version in ("0.9.0", OLD):
        folder = layout.version_dir(version)
        folder.mkdir()
        (folder / ".complete").write_text("0" * 64 + "\n")
    layout.point("previous", "0.9.0")
    layout.point("current", OLD)
    staging = layout.staging_dir(NEW)
    staging.mkdir()  # the first install's half-made build
    before = _builds(layout)
    wheels = tmp_path / "wheels"
    make_wheel(wheels, NEW, "good")

    with PidLock(layout.versions / OWN_BUILDS_LOCK_NAME):
        with pytest.raises(UpdateInProgress, match=f"held by pid {os.getpid()}") as raised:
            install_build(own_root=layout.root, wheels=wheels, version=NEW, python=sys.executable)
        # The daemon's run it stops may pass: tried again inside its window, no build's failure.
        assert failure_reason(raised.value) == (OutcomeReason.INTERRUPTED, True)
        with pytest.raises(UpdateInProgress, match="one at a time"):
            _host(layout, state_dir).switch("0.9.0", RUN)

    assert _builds(layout) == before
    assert staging.is_dir()
    assert (layout.link_target("current"), layout.link_target("previous")) == (OLD, "0.9.0")
    _untouched(layout, state_dir)
    # Once it has ended, the install goes ahead.
    install_build(own_root=layout.root, wheels=wheels, version=NEW, python=sys.executable)
    assert layout.complete_sha256(NEW) is not None
