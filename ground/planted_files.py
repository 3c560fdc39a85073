"""Reading a file that someone else may have put in place.

The agent's commands run as root over folders its own service user may write (the state
directory), and every command reads files named on its command line, where a wrong path may be a
device or a pipe. One rule for all of them: a file is opened without waiting (a named pipe nobody
writes to would hold the command for ever), through a symbolic link only where the caller allows
it (a link planted in the state directory must not lead root to a file of root's), used only when
it is a regular file, and never read beyond what the caller can take.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

__all__ = ["NotRegularFile", "open_regular", "read_regular"]

_LINK = "is a symbolic link; not followed"
_NOT_REGULAR = "not a regular file (a pipe, a device or a folder)"


class NotRegularFile(OSError):
    """A symbolic link that was not to be followed, a named pipe, a device or a folder;
    `strerror` says which, in words a refusal can quote after the file's name."""


def open_regular(path: Path, *, follow_links: bool) -> BinaryIO:
    """The regular file at `path`, open for reading (the caller closes it). `FileNotFoundError`
    when there is none, `NotRegularFile`, or any other `OSError` of the open."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | (0 if follow_links else os.O_NOFOLLOW)
    try:
        descriptor = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_links:
            raise NotRegularFile(errno.ELOOP, _LINK, str(path)) from exc
        raise
    opened = os.fdopen(descriptor, "rb")
    try:
        if not stat.S_ISREG(os.fstat(opened.fileno()).st_mode):
            raise NotRegularFile(errno.EINVAL, _NOT_REGULAR, str(path))
        os.set_blocking(descriptor, True)
    except BaseException:
        opened.close()
        raise
    return opened


def read_regular(path: Path, limit: int, *, follow_links: bool) -> bytes:
    """At most `limit + 1` bytes of the regular file at `path`: more than `limit` tells the
    caller it is too large, without reading it to its end. Raises as `open_regular` does."""
    with open_regular(path, follow_links=follow_links) as opened:
        return opened.read(limit + 1)
