"""The tests' way of starting `nachtwacht` children: from this checkout, and forked from a fork
server (`FORKED`, a `nachtwacht.demo_world.children.Launcher`).

A command that runs to completion (`run_child`: the admin commands, `release sign`, `agent
enroll`) is forked from a process that has imported the command line's parts once — Python's
forkserver — instead of starting an interpreter that imports them again: most of a short
command's CPU is its imports, and the tests' worlds run hundreds of commands.
The child is still a process of its own: its environment is exactly `CHECKOUT.environment`'s
(the server's inherited one is cleared), its working directory the checkout, its exit handlers,
output and exit status its own.

`control serve` is forked from the same server (`FORKED.start`; the tests' fixture passes
`launcher=FORKED` to `start_control_plane`): it imports the app once there (most of a server's
start is its imports, and the tests start many servers). A `ForkedProcess`
is signalled, killed, waited for and read from as a `subprocess.Popen` is; it is `nachtwacht
control serve` from its `main` on. The benches' servers and the agent's daemon (`agent run`) are
interpreters of their own: a bench measures the server as it ships, and what the daemon imports
is part of what the tests measure of it. Where the platform has no fork server, `FORKED` starts
interpreters (`CHECKOUT`).

A program that uses the fork server needs the `if __name__ == "__main__":` guard around what its
main module runs, as every program that uses Python's multiprocessing does.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from nachtwacht.cli import SUBCOMMANDS
from nachtwacht.demo_world import children
from nachtwacht.demo_world.children import Subprocesses, nachtwacht_command

__all__ = [
    "CHECKOUT",
    "FORKED",
    "REPO_ROOT",
    "ForkServer",
    "ForkedProcess",
    "can_fork",
    "child_environment",
    "nachtwacht_command",
    "run_child",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
# Every child an interpreter of its own, importing this checkout and running in it.
CHECKOUT = Subprocesses(checkout=REPO_ROOT)
# What the fork server imports once: the command line, each of its commands, and the app that
# `control serve` runs (a part that is not installed is skipped by the fork server).
_PRELOAD = [
    "nachtwacht.cli",
    *(module for module, _ in SUBCOMMANDS.values()),
    "control_plane.server",
]
_CLI_PATH = str(REPO_ROOT / "nachtwacht" / "cli.py")  # sys.argv[0] under `python -m nachtwacht.cli`


def child_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child: this checkout importable, no inherited nachtwacht settings."""
    return CHECKOUT.environment(extra)


def run_child(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`nachtwacht ARGS` to completion, output captured; the caller judges the exit status.
    Forked from the fork server where there is one (see the module's docstring)."""
    return FORKED.run(*args, env=env)


@dataclass(frozen=True)
class ForkServer:
    """A `Launcher` that forks each child from the fork server (where the platform has one)."""

    def environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return CHECKOUT.environment(extra)

    def run(
        self, *args: str, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        if not can_fork():
            return CHECKOUT.run(*args, env=env)
        return _forked_run(list(args), self.environment(env))

    def start(self, *args: str, env: Mapping[str, str] | None, stderr_path: Path) -> children.Child:
        if not can_fork():
            return CHECKOUT.start(*args, env=env, stderr_path=stderr_path)
        return start_forked(*args, env=self.environment(env), stderr_path=stderr_path)


FORKED = ForkServer()


def _fork_server() -> multiprocessing.context.BaseContext:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    return context


def _forked_run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="nachtwacht-command-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        child = _start_child(argv, env, _Output(path=str(out)), err)
        deadline = children.COMMAND_DEADLINE_SECONDS
        child.join(deadline)
        if child.exitcode is None:
            child.kill()
            child.join()
            raise subprocess.TimeoutExpired(nachtwacht_command(*argv), deadline)
        code = child.exitcode
        child.close()
        return subprocess.CompletedProcess(
            nachtwacht_command(*argv),
            code,
            out.read_text(errors="replace") if out.exists() else "",
            err.read_text(errors="replace") if err.exists() else "",
        )


@dataclass(frozen=True)
class _Output:
    """Where a forked child's stdout goes: a file it creates, or the write end of a pipe."""

    path: str | None = None
    pipe: Any = None  # multiprocessing.connection.Connection: sent to the child as a descriptor


class ForkedProcess:
    """A forked `nachtwacht` command that runs until it is stopped: what the worlds use of
    `subprocess.Popen` — `pid`, `stdout` (text), `poll`, `wait`, `send_signal`, `kill`."""

    def __init__(self, child: Any, stdout: IO[str], argv: Sequence[str]) -> None:
        self._child = child
        self.stdout: IO[str] | None = stdout
        self.args = nachtwacht_command(*argv)
        self.pid: int = child.pid

    @property
    def returncode(self) -> int | None:
        code: int | None = self._child.exitcode
        return code

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._child.join(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            # The child may have ended before its exit was read here (the fork server reaps
            # it): then there is nothing left to signal.
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def start_forked(*args: str, env: Mapping[str, str], stderr_path: Path) -> ForkedProcess:
    """Start `nachtwacht ARGS` forked from the fork server, with `env` as its whole environment
    (as `child_environment` makes it); its stdout is the returned process's `stdout` pipe, its
    stderr is appended to `stderr_path`. Only where `can_fork()` is true: `FORKED.start` starts an
    interpreter otherwise."""
    reader, writer = multiprocessing.Pipe(duplex=False)
    child = _start_child(list(args), env, _Output(pipe=writer), stderr_path)
    writer.close()
    stdout = os.fdopen(os.dup(reader.fileno()), "r")
    reader.close()
    return ForkedProcess(child, stdout, args)


def _start_child(argv: list[str], env: Mapping[str, str], out: _Output, err: Path) -> Any:
    """A started child of the fork server that becomes `nachtwacht ARGV`."""
    child = _fork_server().Process(  # type: ignore[attr-defined]
        target=_run_forked_command,
        args=(argv, dict(env), str(REPO_ROOT), out, str(err)),
        name=f"nachtwacht {' '.join(argv[:2])}",
    )
    child.start()
    return child


def can_fork() -> bool:
    """Whether this platform has Python's fork server (Linux and the other Unixes do)."""
    return "forkserver" in multiprocessing.get_all_start_methods()


def _run_forked_command(
    argv: Sequence[str], env: Mapping[str, str], cwd: str, out: _Output, err: str
) -> None:
    """In the forked child: become `nachtwacht ARGV` as a fresh interpreter would run it, then
    exit with its status (an escaping exception: its traceback and 1, as Python does)."""
    if out.pipe is not None:
        os.dup2(out.pipe.fileno(), 1)
        out.pipe.close()
    else:
        assert out.path is not None
        target = os.open(out.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, 1)
        os.close(target)
    target = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(target, 2)
    os.close(target)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.argv = [_CLI_PATH, *argv]
    # Exit handlers are the command's own: none inherited from the fork server's imports, and the
    # ones it registers (the embedded PostgreSQL's release) run at its end, as at an interpreter's.
    atexit._clear()
    code = 1
    try:
        from nachtwacht.cli import main

        code = main(list(argv))
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)
