"""A file given on a command line, read no further than what it can be: a wrong path may name a
disk image, or a device (`/dev/zero`) or a pipe that has no size to check first and no end."""

from __future__ import annotations

from pathlib import Path

__all__ = ["read_at_most"]


def read_at_most(path: Path, limit: int) -> bytes:
    """At most `limit + 1` bytes of the file: more than `limit` tells the caller it is too large,
    without reading it to its end. An `OSError` is the caller's to word."""
    with path.open("rb") as opened:
        return opened.read(limit + 1)
