"""`nachtwacht agent self-update install | switch | status`: the updater's own builds by hand.

`install` makes `versions/<v>/venv` from an offline bundle's wheels; `switch` makes it `current`,
uncommitted, and restarts the unit (the new build commits once it has polled the control plane,
or the guard takes it back); `status` shows the builds, the links and a pending switch. The
daemon's minute calls the same functions (`self_update.own_builds`, `self_update.pending_switch`).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent_daemon.errors import SelfUpdateError
from agent_daemon.self_update.own_builds import install_build
from agent_daemon.self_update.pending_switch import (
    pending_switch,
    read_switch_outcome,
    switch,
)
from agent_daemon.settings import AgentPaths
from agent_daemon.updater.layout import InstallLayout

__all__ = ["install_own_build", "show_own_builds", "switch_own_build"]


def install_own_build(*, own_root: Path, wheels: Path, version: str, python: str) -> int:
    folder = install_build(own_root=own_root, wheels=wheels, version=version, python=python)
    print(f"installed the updater's build {version} in {folder}")
    return 0


def switch_own_build(
    paths: AgentPaths,
    *,
    own_root: Path,
    version: str,
    deadline_seconds: float,
    restart_command: str,
) -> int:
    command = shlex.split(restart_command)

    def restart() -> None:
        if not command:
            return
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SelfUpdateError(f"--restart-command: {restart_command!r}: {exc}") from exc
        if done.returncode != 0:
            # One line, however many the command wrote (systemctl on a host without systemd
            # writes two).
            said = "; ".join(line.strip() for line in done.stderr.splitlines() if line.strip())
            raise SelfUpdateError(
                f"--restart-command: {restart_command!r} exited {done.returncode}: "
                f"{said} (the switch stays pending; the guard takes it back at "
                "the deadline unless the unit restarts into the new build)"
            )

    pending = switch(
        own_root=own_root,
        state_dir=paths.state_dir,
        to_version=version,
        now=datetime.now(UTC),
        restart=restart,
        deadline=timedelta(seconds=deadline_seconds),
    )
    print(
        f"switched the updater from {pending.from_version} to {pending.to_version}; it counts "
        f"once the new build polls the control plane (by {pending.deadline:%Y-%m-%d %H:%M:%SZ}), "
        "else the guard goes back"
    )
    return 0


def show_own_builds(paths: AgentPaths, *, own_root: Path) -> int:
    layout = InstallLayout(own_root)
    out = sys.stdout
    print(f"own root: {own_root}", file=out)
    print(f"current:  {layout.link_target('current') or '-'}", file=out)
    print(f"previous: {layout.link_target('previous') or '-'}", file=out)
    for version in layout.installed_versions():
        whole = "complete" if layout.complete_sha256(version) else "torn"
        print(f"  {version} ({whole})", file=out)
    pending = pending_switch(paths.state_dir)
    if pending is not None:
        print(
            f"pending:  {pending.from_version} -> {pending.to_version}, "
            f"{pending.attempts} start(s), deadline {pending.deadline:%Y-%m-%d %H:%M:%SZ}",
            file=out,
        )
    outcome = read_switch_outcome(paths.state_dir)
    if outcome is not None:
        detail = f" ({outcome.reason}, {outcome.failed_version})" if outcome.reason else ""
        print(f"last switch: {outcome.outcome}{detail}", file=out)
    return 0
