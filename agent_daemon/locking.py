"""One update at a time: an exclusive, non-blocking `flock` on `update.lock` in the state
directory. The kernel drops the lock when its holder dies, even by SIGKILL, so a crash never leaves
a stale lock behind."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agent_daemon.errors import UpdateInProgress

__all__ = ["LOCK_FILE_NAME", "update_lock"]

LOCK_FILE_NAME = "update.lock"


@contextmanager
def update_lock(state_dir: Path) -> Iterator[None]:
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / LOCK_FILE_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise UpdateInProgress(
                f"another update is in progress (lock {path} held by pid {holder}); "
                "one update at a time"
            ) from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)
