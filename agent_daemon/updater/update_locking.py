"""One update at a time, with the updater's own umask: what every entry point of `Updater` holds.

`update_lock` is a file lock in the state directory (`update.lock`, through `pid_lock`), held
across processes and threads; `updater_umask` makes the folders and files the updater creates
readable by the managed agent's user and writable only by the updater, whatever umask the caller
(a shell, systemd's `UMask=`) happened to have.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agent_daemon.disk.pid_lock import LockHeld, PidLock
from agent_daemon.errors import UpdateInProgress

__all__ = ["UPDATER_UMASK", "UPDATE_LOCK_NAME", "update_lock", "updater_umask"]

UPDATE_LOCK_NAME = "update.lock"
UPDATER_UMASK = 0o022


@contextmanager
def update_lock(state_dir: Path) -> Iterator[None]:
    """One update at a time (`UpdateInProgress` otherwise), across processes and threads."""
    lock = PidLock(state_dir / UPDATE_LOCK_NAME)
    try:
        lock.acquire()
    except LockHeld as exc:
        raise UpdateInProgress(
            f"another update is in progress (lock {exc.path} held by pid {exc.pid or 'unknown'});"
            " one update at a time"
        ) from exc
    try:
        yield
    finally:
        lock.release()


@contextmanager
def updater_umask() -> Iterator[None]:
    previous = os.umask(UPDATER_UMASK)
    try:
        yield
    finally:
        os.umask(previous)
