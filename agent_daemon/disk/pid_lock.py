"""One process at a time: an exclusive, non-blocking `flock` that records its holder's pid.

Both "one daemon per state directory" (`daemon.lock`) and "one update at a time" (`update.lock`)
are this lock. The kernel drops a `flock` when its holder dies, even by SIGKILL, so a crash never
leaves a stale lock behind; the pid inside is only for the message naming who holds it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType

from ground.whole_numbers import whole_number

__all__ = ["LockHeld", "PidLock", "lock_holder"]

# "4294967295\n" and some room: a pid is never longer.
_PID_BYTES = 32


class LockHeld(Exception):
    """Another process holds the lock; `pid` is its pid, when it wrote one."""

    def __init__(self, path: Path, pid: int | None) -> None:
        super().__init__(f"{path} is held by pid {pid or 'unknown'}")
        self.path = path
        self.pid = pid


class PidLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock and write this pid into it, or raise `LockHeld` at once."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            pid = _pid_in(os.pread(fd, _PID_BYTES, 0))
            os.close(fd)
            raise LockHeld(self.path, pid) from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> PidLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()


def lock_holder(path: Path) -> int | None:
    """The pid holding the lock at `path` (-1 when it wrote none), or None when nobody holds it.
    Only looks: a shared, non-blocking probe that is let go at once."""
    try:
        # Without waiting: a named pipe planted in its place would hold the caller forever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _pid_in(os.pread(fd, _PID_BYTES, 0)) or -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _pid_in(raw: bytes) -> int | None:
    return whole_number(raw.decode(errors="replace").strip(), max_digits=10)
