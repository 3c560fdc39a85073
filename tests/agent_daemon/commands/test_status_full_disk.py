"""`nachtwacht agent status` on a state directory whose disk is full, for real (a small tmpfs):
the daemon can write nothing there — not its state, its reports or the activity file status
reads — so status, which only reads, looks at the room itself and says so under `attention`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.agent_daemon.commands.test_run_start_errors import write_enrolled_config
from tests.agent_daemon.commands.test_status_set_aside import attention
from tests.worlds.daemons import run_agent
from tests.worlds.hosts import AgentHost

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root"),
]


def _fill(path: Path) -> None:
    """Write until the file system says it is full (big pieces first, then small ones)."""
    with path.open("wb", buffering=0) as sink:
        for piece in (64 * 1024, 4096, 1):
            try:
                while True:
                    sink.write(b"\0" * piece)
            except OSError:
                continue


def test_a_full_state_directory_is_named_under_attention(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    write_enrolled_config(host)
    state = host.state_dir
    saved = tmp_path / "state-before-tmpfs"
    subprocess.run(["cp", "-a", str(state), str(saved)], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", str(state)])
    try:
        subprocess.run(["cp", "-a", f"{saved}/.", str(state)], check=True)
        with_room = run_agent("status", "--state-dir", str(state))
        assert with_room.returncode == 0, with_room.stderr
        assert not [line for line in attention(with_room.stdout) if "disk" in line]

        _fill(state / "filler")
        text = run_agent("status", "--state-dir", str(state))
        assert text.returncode == 0, text.stderr
        [line] = [line for line in attention(text.stdout) if "is full" in line]
        assert line.startswith(f"the disk of the state directory {state} is full (")
        assert "a granted update is not started" in line
        assert "free space there" in line
        document = json.loads(run_agent("status", "--json", "--state-dir", str(state)).stdout)
        assert line in document["problems"]
        assert document["state_dir_free_bytes"] < 64 * 1024
    finally:
        subprocess.run(["umount", "-l", str(state)], check=False)
