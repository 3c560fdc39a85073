"""A key file's bytes, read under one bound: the signing tools' keys (`signed_release.keys`) and
the agent's trusted release keys (`agent_daemon.updater.trusted_keys`, which reads them at start
without `cryptography`, so this module imports none) are refused alike when they are too large
or cannot be read, naming the file."""

from __future__ import annotations

from pathlib import Path

from signed_release.errors import KeyFileError

__all__ = ["MAX_KEY_FILE_BYTES", "read_key_file"]

# A PEM key is a few hundred bytes; a larger file is not a key, and is not read into memory.
MAX_KEY_FILE_BYTES = 16 * 1024


def read_key_file(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_KEY_FILE_BYTES:
            raise KeyFileError(f"{path}: {size} bytes is too large for a key file")
        return path.read_bytes()
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
