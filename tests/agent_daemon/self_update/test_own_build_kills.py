"""kill -9 at each step of a switch of the updater's own build, then the host comes back (the
unit's next start runs the guard first): it ends on exactly one build — `current` names a complete
one, and either no switch is pending or the pending one is to the build `current` names, which
then commits or is taken back like any other. Each kill is a real SIGKILL of the process doing the
step, at the step's end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_daemon.self_update.own_builds import RunningBuild
from agent_daemon.self_update.pending_switch import (
    commit_if_pending,
    pending_switch,
    read_switch_outcome,
)
from agent_daemon.updater.layout import InstallLayout
from tests.agent_daemon.self_update.own_build_kit import (
    NEW,
    OLD,
    OLDER,
    links,
    make_wheel,
    run_guard,
)
from tests.worlds.processes import REPO_ROOT

pytestmark = pytest.mark.slow

# Runs `switch` and SIGKILLs itself right after the step named in argv[3].
_SWITCH_KILLED_AFTER = """
import os, signal, sys
from datetime import UTC, datetime
from pathlib import Path

from agent_daemon.self_update import pending_switch
from agent_daemon.updater.layout import InstallLayout

own_root, state_dir, step = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]


def die():
    os.kill(os.getpid(), signal.SIGKILL)


write_fields, point = pending_switch.write_fields, InstallLayout.point


def write_then_die(path, fields):
    write_fields(path, fields)
    if step == "pending_written" and path.name == "pending":
        die()


def point_then_die(self, name, version):
    point(self, name, version)
    if step == f"{name}_moved":
        die()


pending_switch.write_fields = write_then_die
InstallLayout.point = point_then_die
pending_switch.switch(
    own_root=own_root,
    state_dir=state_dir,
    to_version="2.0.0",
    now=datetime.now(UTC),
    restart=die if step == "restart_asked" else (lambda: None),
)
"""


def _python_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT)}


@pytest.mark.parametrize(
    ("step", "after_the_next_start"),
    [
        pytest.param("pending_written", (OLD, OLDER), id="killed_after_the_record"),
        pytest.param("previous_moved", (OLD, OLDER), id="killed_after_previous_moved"),
        pytest.param("current_moved", (NEW, OLD), id="killed_after_current_moved"),
        pytest.param("restart_asked", (NEW, OLD), id="killed_by_the_restart"),
    ],
)
def test_a_switch_killed_at_each_step_ends_on_one_build(
    layout: InstallLayout,
    state_dir: Path,
    step: str,
    after_the_next_start: tuple[str, str],
) -> None:
    killed = subprocess.run(
        [sys.executable, "-c", _SWITCH_KILLED_AFTER, str(layout.root), str(state_dir), step],
        env=_python_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr

    assert run_guard("pre-start", state_dir).returncode == 0
    assert links(layout) == after_the_next_start
    current = layout.link_target("current")
    assert current is not None and layout.complete_sha256(current) is not None
    pending = pending_switch(state_dir)
    if current == OLD:
        assert pending is None
        outcome = read_switch_outcome(state_dir)
        assert outcome is not None and outcome.reason == "switch_interrupted"
    else:
        # The new build started; once it polls, it commits.
        assert pending is not None and pending.to_version == current
        running = RunningBuild(own_root=layout.root, version=NEW)
        assert commit_if_pending(state_dir, running, now=datetime.now(UTC)) is not None
        assert pending_switch(state_dir) is None


def test_an_install_killed_while_pip_runs_leaves_current_alone_and_is_done_again(
    tmp_path: Path,
) -> None:
    own_root = tmp_path / "own"
    layout = InstallLayout(own_root)
    layout.ensure()
    (layout.version_dir(OLD) / "venv").mkdir(parents=True)
    (layout.version_dir(OLD) / ".complete").write_text("sha\n")
    layout.point("current", OLD)
    wheels = tmp_path / "wheels"
    make_wheel(wheels, NEW, "good")
    install = (
        "import sys; from pathlib import Path; "
        "from agent_daemon.self_update.own_builds import install_build; "
        "install_build(own_root=Path(sys.argv[1]), wheels=Path(sys.argv[2]), version='2.0.0', "
        "python=sys.executable)"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", install, str(own_root), str(wheels)],
        env=_python_env(),
        start_new_session=True,
    )
    staging = layout.versions / f".{NEW}.tmp" / "venv"
    deadline = time.monotonic() + 120
    while not (staging / "bin").exists():
        assert time.monotonic() < deadline, "the install never started its venv"
        assert process.poll() is None, "the install ended before it could be killed"
        time.sleep(0.02)
    # The whole group: the install and the `python -m venv` or pip it runs.
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()

    assert layout.link_target("current") == OLD
    assert layout.complete_sha256(NEW) is None
    assert NEW not in [v for v in layout.installed_versions() if layout.complete_sha256(v)]

    done = subprocess.run(
        [sys.executable, "-c", install, str(own_root), str(wheels)],
        env=_python_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert layout.complete_sha256(NEW) is not None
    assert not (layout.versions / f".{NEW}.tmp").exists()
    assert (layout.version_dir(NEW) / "venv" / "bin" / "python").exists()
    assert layout.link_target("current") == OLD
