"""A key file's bytes, read under one bound: the signing tools' keys (`signed_release.keys`) and
the agent's trusted release keys (`agent_daemon.updater.trusted_keys`, which reads them at start
without `cryptography`, so this module imports none) are refused alike when they are too large
or cannot be read, naming the file."""

from __future__ import annotations

import os
from pathlib import Path

from ground.planted_files import NotRegularFile, open_regular
from signed_release.errors import KeyFileError

__all__ = ["MAX_KEY_FILE_BYTES", "read_key_file"]

# A PEM key is a few hundred bytes; a larger file is not a key, and is not read into memory.
MAX_KEY_FILE_BYTES = 16 * 1024


def read_key_file(path: Path, *, regular_only: bool = False) -> bytes:
    """The file's bytes, read no further than the bound: a pipe or a device (`/dev/zero`) has no
    size to check first, and would otherwise be read until memory runs out. A key named on a
    signing machine's command line may come through a pipe; a host's trusted key is a file of
    the host's (`regular_only`: never waited on as a pipe, `ground.planted_files`)."""
    try:
        with open_regular(path, follow_links=True) if regular_only else path.open("rb") as opened:
            size = os.fstat(opened.fileno()).st_size
            if size > MAX_KEY_FILE_BYTES:
                raise KeyFileError(f"{path}: {size} bytes is too large for a key file")
            data = opened.read(MAX_KEY_FILE_BYTES + 1)
    except NotRegularFile as exc:
        raise KeyFileError(f"{path}: {exc.strerror} — expected a key file") from exc
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    if len(data) > MAX_KEY_FILE_BYTES:
        raise KeyFileError(
            f"{path}: more than {MAX_KEY_FILE_BYTES} bytes is too large for a key file"
        )
    return data
