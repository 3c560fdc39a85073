"""`nachtwacht agent …` as real processes: the one-shot commands (`enroll`, `status`) and the daemon
(`run`), whose stdout is one JSON event per line.

    run_agent("status", "--state-dir", …)       # a CompletedProcess
    launch_daemon(state_dir, env={NACHTWACHT_FAKE_CLOCK: …}, stdout=log, stderr=errors)
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from nachtwacht.demo_world.children import SUBPROCESSES, Launcher, Subprocesses

__all__ = ["launch_daemon", "run_agent"]


def run_agent(
    *args: str, env: Mapping[str, str] | None = None, launcher: Launcher = SUBPROCESSES
) -> subprocess.CompletedProcess[str]:
    """`nachtwacht agent ARGS` to completion; the caller checks the exit status."""
    return launcher.run("agent", *args, env=env)


def launch_daemon(
    state_dir: Path,
    *,
    env: Mapping[str, str],
    stdout: IO[bytes] | int,
    stderr: IO[bytes] | int,
    interpreters: Subprocesses = SUBPROCESSES,
) -> subprocess.Popen[bytes]:
    """Start `nachtwacht agent run --state-dir STATE_DIR` (its events go to `stdout`) as an
    interpreter of its own: what the daemon imports is part of what it is."""
    return interpreters.popen(
        "agent", "run", "--state-dir", str(state_dir), env=env, stdout=stdout, stderr=stderr
    )
