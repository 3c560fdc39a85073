"""The `nachtwacht` command as a child process of this interpreter and checkout.

Every world starts its programs the way a user would, through `nachtwacht …`; the child finds this
checkout on `PYTHONPATH` (the package need not be installed) and inherits no nachtwacht setting
from whoever runs the world, so a developer's own `NACHTWACHT_FAKE_CLOCK` or systemd's variables
cannot leak into a test.

A command that runs to completion (`run_child`: the admin commands, `release sign`, `agent
enroll`) is forked from a process that has imported the command line's parts once — Python's
forkserver — instead of starting an interpreter that imports them again: a `control create-org`
cost 0.27 s of CPU that way and costs 0.02 s forked, and the tests' worlds run some 450 of them.
The child is still a process of its own: its environment is exactly `child_environment`'s (the
server's inherited one is cleared), its working directory the checkout, its exit handlers, output
and exit status its own.

`control serve` can be forked from the same server (`start_forked`; `start_control_plane(
forked=True)`, which the tests' fixture uses): it imports the app once there (0.87 s of CPU a
start, about two thirds of it imports, and the tests start some 150 servers). A `ForkedProcess`
is signalled, killed, waited for and read from as a `subprocess.Popen` is; it is `nachtwacht
control serve` from its `main` on. The demo's and the benches' servers and the agent's daemon
(`agent run`) are interpreters of their own: a kept server outlives its caller, a bench measures
the server as it ships, and what the daemon imports is part of what the tests measure of it.

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

from nachtwacht.worlds.errors import WorldError

__all__ = [
    "COMMAND_DEADLINE_SECONDS",
    "REPO_ROOT",
    "STOP_DEADLINE_SECONDS",
    "ForkedProcess",
    "can_fork",
    "child_environment",
    "nachtwacht_command",
    "run_child",
    "run_nachtwacht",
    "start_forked",
    "stop_process",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
# Deadlines for a failure, not speed expectations: a healthy command takes a second or two.
COMMAND_DEADLINE_SECONDS = 120.0
STOP_DEADLINE_SECONDS = 60.0
# Set by systemd for a service; a child that saw them would act as the service.
_SYSTEMD_VARIABLES = ("STATE_DIRECTORY", "NOTIFY_SOCKET", "CONFIGURATION_DIRECTORY")
# What the fork server imports once: every command `run_child` is used for.
_PRELOAD = [
    "nachtwacht.cli",
    "control_plane.cli",
    "control_plane.server",
    "agent_daemon.commands.cli",
    "nachtwacht.release_cli",
]
_CLI_PATH = str(REPO_ROOT / "nachtwacht" / "cli.py")  # sys.argv[0] under `python -m nachtwacht.cli`


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
    """`nachtwacht ARGS` to completion, output captured; the caller judges the exit status.
    Forked from the fork server where there is one (see the module's docstring)."""
    child_env = child_environment(env)
    if not can_fork():
        return subprocess.run(
            nachtwacht_command(*args),
            env=child_env,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=False,
            timeout=COMMAND_DEADLINE_SECONDS,
        )
    return _forked_run(list(args), child_env)


def _fork_server() -> multiprocessing.context.BaseContext:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    return context


def _forked_run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="nachtwacht-command-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        child = _start_child(argv, env, _Output(path=str(out)), err)
        child.join(COMMAND_DEADLINE_SECONDS)
        if child.exitcode is None:
            child.kill()
            child.join()
            raise subprocess.TimeoutExpired(nachtwacht_command(*argv), COMMAND_DEADLINE_SECONDS)
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
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def outlive_us(self) -> None:
        """Let it keep running after this interpreter exits (the demo's `--keep`): multiprocessing
        otherwise waits at exit for every child it started."""
        multiprocessing.process._children.discard(self._child)  # type: ignore[attr-defined]


def start_forked(*args: str, env: Mapping[str, str], stderr_path: Path) -> ForkedProcess:
    """Start `nachtwacht ARGS` forked from the fork server, with `env` as its whole environment
    (as `child_environment` makes it); its stdout is the returned process's `stdout` pipe, its
    stderr is appended to `stderr_path`. Only where `can_fork()` is true: the caller starts an
    interpreter otherwise, as `start_control_plane` does."""
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
    process: subprocess.Popen[str] | subprocess.Popen[bytes] | ForkedProcess | None,
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
