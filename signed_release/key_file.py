"""A key file's bytes, read under one bound: the signing tools' keys (`signed_release.keys`) and
the agent's trusted release keys (`agent_daemon.updater.trusted_keys`, which reads them at start
without `cryptography`, so this module imports none) are refused alike when they are too large
or cannot be read, naming the file."""

from __future__ import annotations

import os
from pathlib import Path

from signed_release.errors import KeyFileError

__all__ = ["MAX_KEY_FILE_BYTES", "read_key_file"]

# A PEM key is a few hundred bytes; a larger file is not a key, and is not read into memory.
MAX_KEY_FILE_BYTES = 16 * 1024


def read_key_file(path: Path) -> bytes:
    """The file's bytes, read no further than the bound: a pipe or a device (`/dev/zero`) has no
    size to check first, and would otherwise be read until memory runs out."""
    try:
        # Opened without waiting (a named pipe nobody writes to would hold it forever), then read
        # as usual.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        os.set_blocking(descriptor, True)
        with os.fdopen(descriptor, "rb") as opened:
            size = os.fstat(opened.fileno()).st_size
            if size > MAX_KEY_FILE_BYTES:
                raise KeyFileError(f"{path}: {size} bytes is too large for a key file")
            data = opened.read(MAX_KEY_FILE_BYTES + 1)
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    if len(data) > MAX_KEY_FILE_BYTES:
        raise KeyFileError(
            f"{path}: more than {MAX_KEY_FILE_BYTES} bytes is too large for a key file"
        )
    return data
