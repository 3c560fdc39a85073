"""Running a command whose output the updater does not control: the build's self-test, the health
command (both the managed agent's own code) and the restart command.

The output of a build is untrusted input like everything from the network: it may be any bytes
(not UTF-8), endless, or come from a child that never exits. So a command here

* runs in a session of its own, killed as a whole group when its time is up;
* has its output read as bytes, the first `OUTPUT_LIMIT_BYTES` of each stream kept and the rest
  drained and dropped (never gigabytes in memory), then decoded with replacement characters;
* runs as the managed agent's user when one is configured (`user=`): the build's code must not
  run as root just because the updater does;
* inherits the updater's umask (`Updater` sets 0o022 explicitly);
* is started again for up to a second while its program is "busy" (ETXTBSY): a build unpacked a
  moment ago cannot be executed while any process still holds it open for writing, and a child
  that another thread forks in between holds this process's descriptors until its own exec.

Every way it can go wrong is a `CommandFailed` with a readable message; nothing else escapes.
"""

from __future__ import annotations

import errno
import os
import pwd
import selectors
import signal
import subprocess
import time
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import IO

__all__ = ["OUTPUT_LIMIT_BYTES", "CommandFailed", "CommandResult", "run_bounded"]

# A version line or a health reason is a few dozen bytes; 64 KiB per stream leaves room for a
# stack trace worth reading, and bounds what a broken build can make the updater hold.
OUTPUT_LIMIT_BYTES = 64 * 1024
_READ_CHUNK = 64 * 1024
# How long a program still open for writing elsewhere is tried again, and how often.
_BUSY_FOR_SECONDS = 1.0
_BUSY_PAUSE_SECONDS = 0.01


class CommandFailed(Exception):
    """The command could not be run, or did not finish in time (its process group is killed)."""


@dataclass(frozen=True, kw_only=True)
class CommandResult:
    returncode: int
    stdout: str
    stderr: str


def shown(command: Sequence[str]) -> str:
    return " ".join(command)


def _identity(user: str) -> tuple[int, int]:
    try:
        entry = pwd.getpwuid(int(user)) if user.isdecimal() else pwd.getpwnam(user)
    except (KeyError, ValueError) as exc:
        raise CommandFailed(f"agent_user: {user!r} is not a user on this host") from exc
    return entry.pw_uid, entry.pw_gid


def run_bounded(
    command: Sequence[str], *, timeout: float, user: str | None = None
) -> CommandResult:
    """Run `command` (no shell) for at most `timeout` real seconds, as `user` when given."""
    uid: int | None = None
    gid: int | None = None
    groups: list[int] | None = None
    if user is not None:
        uid, gid = _identity(user)
        if uid == os.geteuid():
            uid = gid = None
        else:
            # Root's supplementary groups are dropped too: the build gets its user's and no more.
            groups = []
    busy_until = time.monotonic() + _BUSY_FOR_SECONDS
    while True:
        try:
            process = subprocess.Popen(
                list(command),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                user=uid,
                group=gid,
                extra_groups=groups,
            )
            break
        except OSError as exc:
            if exc.errno != errno.ETXTBSY or time.monotonic() >= busy_until:
                raise CommandFailed(f"{shown(command)!r} cannot run: {exc}") from exc
        except (ValueError, subprocess.SubprocessError) as exc:
            raise CommandFailed(f"{shown(command)!r} cannot run: {exc}") from exc
        time.sleep(_BUSY_PAUSE_SECONDS)
    assert process.stdout is not None and process.stderr is not None
    deadline = time.monotonic() + timeout
    streams: tuple[IO[bytes], IO[bytes]] = (process.stdout, process.stderr)
    kept = {stream.fileno(): bytearray() for stream in streams}
    try:
        with selectors.DefaultSelector() as selector:
            for stream in streams:
                selector.register(stream, selectors.EVENT_READ)
            while selector.get_map():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CommandFailed(f"{shown(command)!r} did not finish within {timeout:g} s")
                for key, _ in selector.select(remaining):
                    data = os.read(key.fd, _READ_CHUNK)
                    if not data:
                        selector.unregister(key.fileobj)
                        continue
                    buffer = kept[key.fd]
                    buffer += data[: max(OUTPUT_LIMIT_BYTES - len(buffer), 0)]
        try:
            returncode = process.wait(max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired as exc:
            raise CommandFailed(
                f"{shown(command)!r} closed its output but did not exit within {timeout:g} s"
            ) from exc
    except BaseException:
        _kill_group(process)
        raise
    finally:
        out, err = (bytes(kept[stream.fileno()]) for stream in streams)
        for stream in streams:
            stream.close()
    return CommandResult(
        returncode=returncode,
        stdout=out.decode("utf-8", errors="replace"),
        stderr=err.decode("utf-8", errors="replace"),
    )


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    # The whole session: a child the build started must not outlive the deadline either.
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with suppress(ProcessLookupError):
        process.kill()
    process.wait()
