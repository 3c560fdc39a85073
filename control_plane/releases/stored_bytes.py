"""A stored build's bytes (an artifact or a patch) read by range, a slice at a time."""

from __future__ import annotations

from collections.abc import Iterator

from control_plane.types import Pool

__all__ = ["CHUNK_BYTES", "read_range"]

# Read in slices so a large build never sits whole in a worker's memory.
CHUNK_BYTES = 1024 * 1024


def read_range(
    pool: Pool, statement: str, key: list[object], start: int, end: int
) -> Iterator[bytes]:
    """The bytes `start..end` (inclusive) of the one `content` that `statement` finds by `key`;
    the statement selects `substring(content FROM %s FOR %s) AS part`, its first two values, and
    `key` are the rest. Each slice is read on a connection of its own, held only while it is read
    (a slow download never keeps one)."""
    position = start
    while position <= end:
        size = min(CHUNK_BYTES, end - position + 1)
        with pool.connection() as conn:
            row = conn.execute(statement, [position + 1, size, *key]).fetchone()
        if row is None or not row["part"]:
            return
        part = bytes(row["part"])
        yield part
        position += len(part)
