"""The pid inside a held lock only names its holder: whatever bytes another holder wrote there,
the lock still reads as held and nothing raises."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from agent_daemon.disk.pid_lock import LockHeld, PidLock, lock_holder


def test_a_held_lock_names_its_holders_pid(tmp_path: Path) -> None:
    path = tmp_path / "daemon.lock"
    with PidLock(path):
        assert lock_holder(path) == os.getpid()
        with pytest.raises(LockHeld) as held:
            PidLock(path).acquire()
    assert held.value.pid == os.getpid()
    assert lock_holder(path) is None


@pytest.mark.parametrize("written", ["²\n", "٣٤\n", "1_0\n", "-5\n", " \n", "9" * 31, "\xff"])
def test_a_holder_that_wrote_no_pid_reads_as_held_by_an_unknown_process(
    tmp_path: Path, written: str
) -> None:
    path = tmp_path / "daemon.lock"
    path.write_bytes(written.encode("utf-8", errors="surrogateescape"))
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert lock_holder(path) == -1
        with pytest.raises(LockHeld) as held:
            PidLock(path).acquire()
        assert held.value.pid is None
        assert "held by pid unknown" in str(held.value)
    finally:
        os.close(fd)
    assert path.read_bytes() == written.encode("utf-8", errors="surrogateescape")
