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
server's inherited one is cleared), its working directory the checkout, its output and exit status
its own. Servers and daemons (`control serve`, `agent run`) are started as interpreters of their
own: they are signalled, killed and restarted like the real thing.
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
# What the fork server imports once: every command `run_child` is used for.
_PRELOAD = ["nachtwacht.cli", "control_plane.cli", "agent_daemon.cli", "nachtwacht.release_cli"]
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
    if "forkserver" not in multiprocessing.get_all_start_methods():
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


def _forked_run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    with tempfile.TemporaryDirectory(prefix="nachtwacht-command-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        child = context.Process(
            target=_run_forked_command,
            args=(argv, env, str(REPO_ROOT), str(out), str(err)),
            name=f"nachtwacht {' '.join(argv[:2])}",
        )
        child.start()
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


def _run_forked_command(
    argv: Sequence[str], env: Mapping[str, str], cwd: str, out: str, err: str
) -> None:
    """In the forked child: become `nachtwacht ARGV` as a fresh interpreter would run it, then
    exit with its status (an escaping exception: its traceback and 1, as Python does)."""
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
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
