"""The `nachtwacht` command as a child process of this interpreter and checkout.

Every world starts its programs the way a user would, through `nachtwacht …`; the child finds this
checkout on `PYTHONPATH` (the package need not be installed) and inherits no nachtwacht setting
from whoever runs the world, so a developer's own `NACHTWACHT_FAKE_CLOCK` or systemd's variables
cannot leak into a test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from nachtwacht.worlds.errors import WorldError

__all__ = [
    "COMMAND_DEADLINE_SECONDS",
    "REPO_ROOT",
    "STOP_DEADLINE_SECONDS",
    "child_environment",
    "nachtwacht_command",
    "run_child",
    "run_nachtwacht",
    "stop_process",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
# Deadlines for a failure, not speed expectations: a healthy command takes a second or two.
COMMAND_DEADLINE_SECONDS = 120.0
STOP_DEADLINE_SECONDS = 60.0
# Set by systemd for a service; a child that saw them would act as the service.
_SYSTEMD_VARIABLES = ("STATE_DIRECTORY", "NOTIFY_SOCKET", "CONFIGURATION_DIRECTORY")


def nachtwacht_command(*args: str) -> list[str]:
    """The `nachtwacht` command line, run from this checkout."""
    return [sys.executable, "-m", "nachtwacht.cli", *args]


def child_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child: this checkout importable, no inherited nachtwacht settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NACHTWACHT_")}
    for name in _SYSTEMD_VARIABLES:
        env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(REPO_ROOT), env.get("PYTHONPATH")] if p)
    env.update(extra or {})
    return env


def run_child(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`nachtwacht ARGS` to completion, output captured; the caller judges the exit status."""
    return subprocess.run(
        nachtwacht_command(*args),
        env=child_environment(env),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=COMMAND_DEADLINE_SECONDS,
    )


def run_nachtwacht(*args: str, env: Mapping[str, str] | None = None) -> str:
    """Run `nachtwacht ARGS` to completion; its stdout, or WorldError with its last stderr line."""
    name = f"nachtwacht {' '.join(args[:2])}"
    try:
        result = run_child(*args, env=env)
    except subprocess.TimeoutExpired as exc:
        raise WorldError(f"{name} did not finish") from exc
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        raise WorldError(f"{name} failed: {lines[-1] if lines else 'no message'}")
    return result.stdout


def stop_process(
    process: subprocess.Popen[str] | subprocess.Popen[bytes] | None,
    *,
    deadline_seconds: float = STOP_DEADLINE_SECONDS,
) -> int | None:
    """SIGTERM (a clean stop, as systemd asks), then SIGKILL after the deadline; the exit code."""
    if process is None:
        return None
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=deadline_seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()
