"""The writes this replica's workers finished, counted in memory every worker shares.

Made by the serving process before it forks its workers: an anonymous shared mapping, so every
worker reads and moves the same counter, without a system call. A worker counts a write before
it answers the request that made it (`hot_answers`), so whichever worker the agent's next
request reaches sees the count moved, and answers nothing from memory until its change feed has
been read again since (`AnswerMemory`): that read sees the write, which committed before it was
counted.

Two workers counting at once may both store the same next value: the count still moved for any
reader that saw the value before either, and a reader that saw the first store began its read
after both writes had committed (each committed before it loaded the count). A read torn by a
concurrent store gives a value that matches nothing, which only keeps the memory quiet until
the next read of the feed.
"""

from __future__ import annotations

import mmap
import struct

__all__ = ["ReplicaWrites"]

_COUNT = struct.Struct("=Q")


class ReplicaWrites:
    """A counter shared with the processes forked after it was made."""

    def __init__(self) -> None:
        self._shared = mmap.mmap(-1, _COUNT.size)  # anonymous and shared (MAP_SHARED)

    def count(self) -> int:
        value: int = _COUNT.unpack_from(self._shared)[0]
        return value

    def note(self) -> None:
        """A write committed: count it before answering the request that made it."""
        _COUNT.pack_into(self._shared, 0, (self.count() + 1) % 2**64)
