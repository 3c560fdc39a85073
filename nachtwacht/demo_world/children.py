"""The `nachtwacht` command as a child process of this interpreter.

Every world starts its programs the way a user would, through `nachtwacht …`, with this
interpreter (`sys.executable -m nachtwacht.cli`): the installed package, or the checkout the
parent runs from. A child inherits no nachtwacht setting from whoever starts the world, so a
developer's own `NACHTWACHT_FAKE_CLOCK` or systemd's variables cannot leak into it.

How a child is started is a `Launcher`: `SUBPROCESSES` starts an interpreter of its own for each,
which is all the demo needs. Whoever starts hundreds of short commands may bring a faster launcher
(one that forks them from a process that has imported the command line once); every part of a
world takes one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from nachtwacht.demo_world.errors import WorldError

__all__ = [
    "COMMAND_DEADLINE_SECONDS",
    "STOP_DEADLINE_SECONDS",
    "SUBPROCESSES",
    "Child",
    "Launcher",
    "Subprocesses",
    "child_environment",
    "nachtwacht_command",
    "run_nachtwacht",
    "stop_process",
]

# Deadlines for a failure, not speed expectations: a healthy command takes a second or two.
COMMAND_DEADLINE_SECONDS = 120.0
STOP_DEADLINE_SECONDS = 60.0
# Set by systemd for a service; a child that saw them would act as the service.
_SYSTEMD_VARIABLES = ("STATE_DIRECTORY", "NOTIFY_SOCKET", "CONFIGURATION_DIRECTORY")


def nachtwacht_command(*args: str) -> list[str]:
    """The `nachtwacht` command line, run by this interpreter."""
    return [sys.executable, "-m", "nachtwacht.cli", *args]


def child_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without any nachtwacht or systemd setting, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NACHTWACHT_")}
    for name in _SYSTEMD_VARIABLES:
        env.pop(name, None)
    env.update(extra or {})
    return env


class Child(Protocol):
    """A started `nachtwacht` command that runs until it is stopped: what a world uses of
    `subprocess.Popen` (a `Popen` opened in text mode is one)."""

    @property
    def pid(self) -> int: ...

    @property
    def stdout(self) -> IO[str] | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


class Launcher(Protocol):
    """How a world starts `nachtwacht ARGS`."""

    def environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The whole environment of a child given the settings `extra`."""
        ...

    def run(
        self, *args: str, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`nachtwacht ARGS` to completion, output captured; the caller judges the exit status;
        `subprocess.TimeoutExpired` after `COMMAND_DEADLINE_SECONDS`."""
        ...

    def start(self, *args: str, env: Mapping[str, str] | None, stderr_path: Path) -> Child:
        """`nachtwacht ARGS` running, its stdout a text pipe, its stderr appended to
        `stderr_path`."""
        ...


@dataclass(frozen=True, kw_only=True)
class Subprocesses:
    """Each child an interpreter of its own. `checkout`: a source tree the child imports from
    and runs in (the package need not be installed there); None runs the installed package in
    this process's working directory."""

    checkout: Path | None = None

    def environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = child_environment(extra)
        if self.checkout is not None:
            paths = [str(self.checkout), env.get("PYTHONPATH")]
            env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        return env

    def run(
        self, *args: str, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            nachtwacht_command(*args),
            env=self.environment(env),
            cwd=self.checkout,
            capture_output=True,
            text=True,
            check=False,
            timeout=COMMAND_DEADLINE_SECONDS,
        )

    def start(
        self, *args: str, env: Mapping[str, str] | None, stderr_path: Path
    ) -> subprocess.Popen[str]:
        with stderr_path.open("a") as stderr:
            return subprocess.Popen(
                nachtwacht_command(*args),
                env=self.environment(env),
                cwd=self.checkout,
                stdout=subprocess.PIPE,
                stderr=stderr,
                stdin=subprocess.DEVNULL,
                text=True,
            )

    def popen(
        self,
        *args: str,
        env: Mapping[str, str] | None,
        stdout: IO[bytes] | int,
        stderr: IO[bytes] | int,
    ) -> subprocess.Popen[bytes]:
        """`nachtwacht ARGS` running with its output where the caller says (a daemon's events)."""
        return subprocess.Popen(
            nachtwacht_command(*args),
            env=self.environment(env),
            cwd=self.checkout,
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
        )


SUBPROCESSES = Subprocesses()


def run_nachtwacht(
    *args: str, env: Mapping[str, str] | None = None, launcher: Launcher = SUBPROCESSES
) -> str:
    """Run `nachtwacht ARGS` to completion; its stdout, or WorldError with its last stderr line."""
    name = f"nachtwacht {' '.join(args[:2])}"
    try:
        result = launcher.run(*args, env=env)
    except subprocess.TimeoutExpired as exc:
        raise WorldError(f"{name} did not finish") from exc
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        raise WorldError(f"{name} failed: {lines[-1] if lines else 'no message'}")
    return result.stdout


def stop_process(
    process: Child | subprocess.Popen[bytes] | None,
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
