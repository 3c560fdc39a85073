"""`nachtwacht agent status` when the cached config or the daemon's state file cannot be read (cut
short, not JSON, a newer agent's): it still answers, names the file and what to do under
`attention`, and shows the rest; likewise a state directory that is not there. Real files, the
real command."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from agent_daemon.disk.atomic_file import MAX_STATE_FILE_BYTES
from tests.agent_daemon.commands.test_run_start_errors import write_enrolled_config
from tests.agent_daemon.commands.test_status_set_aside import attention
from tests.worlds.daemons import run_agent
from tests.worlds.hosts import AgentHost

pytestmark = pytest.mark.slow

DAMAGED = [
    pytest.param(
        b'{"format_version": 1, "config": {"agent_id"', "is not valid JSON", id="cut_short"
    ),
    pytest.param(b"", "is not valid JSON", id="empty"),
    pytest.param(b'{"format_version": 7}', "written by a newer nachtwacht agent", id="newer"),
    # Valid JSON, but more than the agent ever writes there: not read whole.
    pytest.param(
        b'{"format_version": 1}' + b" " * MAX_STATE_FILE_BYTES,
        f"larger than {MAX_STATE_FILE_BYTES} bytes",
        id="too_large",
    ),
]


@pytest.mark.parametrize(("content", "said"), DAMAGED)
def test_a_config_cache_that_cannot_be_read_is_a_line_not_a_failure(
    tmp_path: Path, content: bytes, said: str
) -> None:
    host = AgentHost(tmp_path / "host")
    write_enrolled_config(host)
    cache = host.state_dir / "config-cache.json"
    cache.write_bytes(content)

    text = run_agent("status", "--state-dir", str(host.state_dir))
    assert text.returncode == 0, text.stderr
    [line] = [line for line in attention(text.stdout) if "cached config" in line]
    assert line.startswith(f"the cached config cannot be read ({cache}: ")
    assert said in line
    assert line.endswith(
        "the daemon fetches it again at its next minute that reaches the control plane; until "
        "then status shows no schedule"
    )
    assert "config:        never synced" in text.stdout
    document = json.loads(run_agent("status", "--json", "--state-dir", str(host.state_dir)).stdout)
    assert document["unreadable_files"] == [line]
    assert document["config"] is None
    assert cache.read_bytes() == content  # status only reads


@pytest.mark.parametrize(("content", "said"), DAMAGED)
def test_a_state_file_that_cannot_be_read_says_what_stops_and_what_to_do(
    tmp_path: Path, content: bytes, said: str
) -> None:
    host = AgentHost(tmp_path / "host")
    write_enrolled_config(host)
    state = host.state_dir / "daemon-state.json"
    state.write_bytes(content)

    text = run_agent("status", "--state-dir", str(host.state_dir))
    assert text.returncode == 0, text.stderr
    [line] = [line for line in attention(text.stdout) if "state file" in line]
    assert line.startswith(f"the daemon's state file cannot be read ({state}: ")
    assert said in line
    assert (
        "the daemon plans and updates nothing while it cannot know which slots it used (one "
        f"tick.failed line a minute) — move it aside (mv {state} {state}.unreadable)"
    ) in line
    assert "last runs:     none yet" in text.stdout
    as_json = run_agent("status", "--json", "--state-dir", str(host.state_dir))
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["unreadable_files"] == [line]
    assert state.read_bytes() == content


def test_a_state_directory_that_is_not_there_is_named_not_shown_as_a_daemon_that_did_nothing(
    tmp_path: Path,
) -> None:
    """The config named on its own (`--config`) with the state directory left to its default or
    mistyped: without this line status reads "never synced" and "none yet", as if the daemon had
    done nothing."""
    host = AgentHost(tmp_path / "host")
    config = write_enrolled_config(host)
    nowhere = tmp_path / "no-such-state"

    text = run_agent("status", "--state-dir", str(nowhere), "--config", str(config))
    assert text.returncode == 0, text.stderr
    [line] = [line for line in attention(text.stdout) if "state directory" in line]
    assert line == (
        f"there is no state directory at {nowhere}: no daemon has run with it, so nothing below "
        "says what a daemon did — if the daemon runs with another state directory, name it "
        "(--state-dir)"
    )
    assert not nowhere.exists()  # status only reads

    there = run_agent("status", "--state-dir", str(host.state_dir), "--config", str(config))
    assert "state directory" not in there.stdout


@pytest.mark.parametrize("kind", ["named_pipe", "link_out"])
@pytest.mark.parametrize("name", ["config-cache.json", "daemon-state.json"])
def test_a_state_file_planted_as_a_pipe_or_a_link_is_named_not_read(
    tmp_path: Path, kind: str, name: str
) -> None:
    # The non-root daemon's user owns the state directory; root runs status (and diagnose).
    host = AgentHost(tmp_path / "host")
    write_enrolled_config(host)
    planted = host.state_dir / name
    secret = tmp_path / "shadow"
    secret.write_text('{"format_version": 1, "stolen": "the-hash-of-roots-password"}')
    if kind == "named_pipe":
        os.mkfifo(planted)
    else:
        planted.symlink_to(secret)
    text = subprocess.run(
        [sys.executable, "-m", "nachtwacht", "agent", "status", "--state-dir",
         str(host.state_dir)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert text.returncode == 0, text.stderr
    [line] = [line for line in attention(text.stdout) if str(planted) in line]
    assert "not a regular file" in line or "a symbolic link" in line, line
    assert "the-hash-of-roots-password" not in text.stdout
    assert planted.is_symlink() or stat.S_ISFIFO(planted.lstat().st_mode)


@pytest.mark.parametrize("name", ["trust_root.json", "daemon.lock"])
def test_a_pipe_planted_as_the_trust_root_or_the_lock_does_not_hold_status(
    tmp_path: Path, name: str
) -> None:
    host = AgentHost(tmp_path / "host")
    write_enrolled_config(host)
    planted = host.state_dir / name
    os.mkfifo(planted, 0o644)
    text = subprocess.run(
        [sys.executable, "-m", "nachtwacht", "agent", "status", "--state-dir",
         str(host.state_dir)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert text.returncode == 0, text.stderr
    if name == "trust_root.json":
        assert f"{planted}: not a regular file" in text.stdout, text.stdout
    assert stat.S_ISFIFO(planted.lstat().st_mode)
