"""Where a test's PostgreSQL keeps its data: in memory when the machine has room for it there.

scratch_dir()     /dev/shm when it is a writable folder with 2 GiB free, else None (the tmp)
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["scratch_dir"]

# A test server's data lives in memory when the machine has room for it there. On a disk, every
# test's `CREATE DATABASE` (the template written as files and WAL) and its `DROP` (the files
# unlinked; a VM's disk mounted with `discard` trims them one by one) make PostgreSQL the
# largest user of CPU in the suite. Nothing needs the data to survive the session.
SCRATCH_IN_MEMORY = Path("/dev/shm")
SCRATCH_NEEDS_BYTES = 2 * 1024**3


def scratch_dir() -> str | None:
    """/dev/shm when it is a writable directory with 2 GiB free, else None (the usual tmp)."""
    try:
        if not (SCRATCH_IN_MEMORY.is_dir() and os.access(SCRATCH_IN_MEMORY, os.W_OK | os.X_OK)):
            return None
        usage = os.statvfs(SCRATCH_IN_MEMORY)
    except OSError:
        return None
    if usage.f_bavail * usage.f_frsize < SCRATCH_NEEDS_BYTES:
        return None
    return str(SCRATCH_IN_MEMORY)
