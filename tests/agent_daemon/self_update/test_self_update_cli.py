"""`nachtwacht agent self-update install | switch | status` as an admin runs them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agent_daemon.self_update.pending_switch import pending_switch
from agent_daemon.updater.layout import InstallLayout
from tests.agent_daemon.self_update.own_build_kit import NEW, OLD, make_wheel
from tests.worlds.daemons import run_agent

pytestmark = pytest.mark.slow


def test_install_then_switch_then_status(tmp_path: Path) -> None:
    own_root, state_dir = tmp_path / "own", tmp_path / "state"
    state_dir.mkdir(mode=0o700)
    layout = InstallLayout(own_root)
    for version in (OLD, NEW):
        make_wheel(tmp_path / "wheels" / version, version, "good")
        installed = run_agent(
            "self-update", "--own-root", str(own_root), "--state-dir", str(state_dir),
            "install", "--wheels", str(tmp_path / "wheels" / version), "--version", version,
            "--python", sys.executable,
        )  # fmt: skip
        assert installed.returncode == 0, installed.stderr
        assert f"installed the updater's build {version}" in installed.stdout
    layout.point("current", OLD)
    restarted = tmp_path / "restarted"

    switched = run_agent(
        "self-update", "--own-root", str(own_root), "--state-dir", str(state_dir),
        "switch", NEW, "--restart-command", f"touch {restarted}",
    )  # fmt: skip

    assert switched.returncode == 0, switched.stderr
    assert "switched the updater from 1.0.0 to 2.0.0" in switched.stdout
    assert restarted.exists()
    assert layout.link_target("current") == NEW
    assert pending_switch(state_dir) is not None
    status = run_agent(
        "self-update", "--own-root", str(own_root), "--state-dir", str(state_dir), "status"
    )
    assert status.returncode == 0, status.stderr
    assert "current:  2.0.0" in status.stdout
    assert "pending:  1.0.0 -> 2.0.0, 0 start(s)" in status.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(
            ["switch", "9.9.9"],
            "version: '9.9.9' is not a complete build under",
            id="not_installed",
        ),
        pytest.param(
            ["install", "--wheels", "{wheels}", "--version", "3.0.0"],
            "wheels: expected one nachtwacht_agent-3.0.0-*.whl in",
            id="no_such_wheel",
        ),
        *(
            pytest.param(
                ["switch", "9.9.9", "--deadline-seconds", value],
                f"--deadline-seconds: found {value!r} — expected a number of seconds above 0",
                id=f"deadline_{value}",
            )
            for value in ("nan", "inf", "-1", "0")
        ),
    ],
)
def test_a_refused_verb_names_the_field_and_the_value(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    own_root, state_dir = tmp_path / "own", tmp_path / "state"
    state_dir.mkdir(mode=0o700)
    (tmp_path / "wheels").mkdir()
    done = run_agent(
        "self-update", "--own-root", str(own_root), "--state-dir", str(state_dir),
        *[a.format(wheels=tmp_path / "wheels") for a in args],
    )  # fmt: skip
    assert done.returncode == 2
    assert expected in done.stderr
    assert "Traceback" not in done.stderr


def test_a_second_switch_while_one_is_pending_is_refused(tmp_path: Path) -> None:
    own_root, state_dir = tmp_path / "own", tmp_path / "state"
    state_dir.mkdir(mode=0o700)
    layout = InstallLayout(own_root)
    layout.ensure()
    for version in (OLD, NEW, "3.0.0"):
        layout.version_dir(version).mkdir()
        (layout.version_dir(version) / ".complete").write_text("sha\n")
    layout.point("current", OLD)
    base = ["self-update", "--own-root", str(own_root), "--state-dir", str(state_dir), "switch"]
    first = run_agent(*base, NEW, "--restart-command", "")
    assert first.returncode == 0, first.stderr
    second = run_agent(*base, "3.0.0", "--restart-command", "")
    assert second.returncode == 2
    assert "a switch is still pending; wait for its outcome" in second.stderr
    assert layout.link_target("current") == NEW


def test_a_failed_restart_is_one_line_naming_the_flag(tmp_path: Path) -> None:
    # systemctl on a host without systemd says so in two lines; the admin gets one.
    own_root, state_dir = tmp_path / "own", tmp_path / "state"
    state_dir.mkdir(mode=0o700)
    layout = InstallLayout(own_root)
    layout.ensure()
    for version in (OLD, NEW):
        layout.version_dir(version).mkdir()
        (layout.version_dir(version) / ".complete").write_text("sha\n")
    layout.point("current", OLD)
    restart = tmp_path / "restart"
    restart.write_text(
        "#!/bin/sh\necho 'not booted with systemd' >&2\necho 'bus down' >&2\nexit 1\n"
    )
    restart.chmod(0o755)
    done = run_agent(
        "self-update", "--own-root", str(own_root), "--state-dir", str(state_dir),
        "switch", NEW, "--restart-command", str(restart),
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        f"nachtwacht agent self-update: --restart-command: '{restart}' exited 1: not booted with "
        "systemd; bus down (the switch stays pending; the guard takes it back at the deadline "
        "unless the unit restarts into the new build)\n"
    )
    assert pending_switch(state_dir) is not None
