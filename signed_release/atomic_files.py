"""Files written whole or not at all: a temporary beside the target, fsynced, then linked (a new
file, never replacing one) or renamed over it (keeping its mode), and the directory fsynced."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

__all__ = ["replace_file", "write_new_file"]


def write_new_file(path: Path, data: bytes, *, mode: int) -> None:
    """Write `path` whole or not at all; FileExistsError if there is one (never replaced)."""
    temporary = _written_temporary(path, data, mode)
    try:
        os.link(temporary, path)  # unlike a rename, a link never replaces: FileExistsError
    finally:
        temporary.unlink()
    _fsync_directory(path.parent)


def replace_file(path: Path, data: bytes) -> None:
    """Replace `path` atomically, keeping its mode: a writer interrupted midway leaves the old
    file whole (for a root being signed in turn: never half a signature list)."""
    mode = stat.S_IMODE(path.stat().st_mode)
    temporary = _written_temporary(path, data, mode)
    try:
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def _written_temporary(path: Path, data: bytes, mode: int) -> Path:
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        Path(name).unlink(missing_ok=True)
        raise
    os.close(fd)
    return Path(name)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        with contextlib.suppress(OSError):  # some filesystems cannot fsync a directory
            os.fsync(fd)
    finally:
        os.close(fd)
