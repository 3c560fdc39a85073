"""`nachtwacht agent status` run by root on a daemon that runs as its own user (the non-root mode):
root reads that daemon's config and files for display. The ownership checks still keep root from
acting on them: `run` and the verbs that use the credential refuse a config another user owns."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_daemon.disk.held_trust_root import HeldTrustRootFile
from agent_daemon.errors import DaemonStateError
from tests.agent_daemon.commands.test_run_start_errors import write_enrolled_config
from tests.agent_daemon.trust_roots.chain import RootChain
from tests.worlds.daemons import run_agent
from tests.worlds.hosts import AgentHost

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give files to another user"),
]

# The non-root daemon's user (the packaged sysusers file makes a system user like it).
DAEMON_UID = 999


def non_root_host(tmp_path: Path) -> tuple[AgentHost, Path]:
    host = AgentHost(tmp_path / "host")
    config = write_enrolled_config(host)
    held = HeldTrustRootFile(host.state_dir / "trust_root.json")
    held.save(RootChain().versions[1])
    for path in (config, held.path, host.state_dir):
        os.chown(path, DAEMON_UID, DAEMON_UID)
    return host, config


def test_root_sees_the_status_of_a_daemon_running_as_its_own_user(tmp_path: Path) -> None:
    host, _ = non_root_host(tmp_path)
    result = run_agent("status", "--state-dir", str(host.state_dir))
    assert result.returncode == 0, result.stderr
    assert "owned by uid" not in result.stdout + result.stderr
    assert "agent:         " in result.stdout
    assert "trust root:    v1, expires" in result.stdout


def test_root_still_refuses_to_run_on_a_config_another_user_owns(tmp_path: Path) -> None:
    host, config = non_root_host(tmp_path)
    for verb in ("run", "release-hold"):
        result = run_agent(verb, "--state-dir", str(host.state_dir))
        assert result.returncode != 0
        assert f"{config}: owned by uid {DAEMON_UID}, expected the daemon's own user" in (
            result.stderr
        )


def test_a_root_file_of_the_daemons_user_is_read_only_for_that_user(tmp_path: Path) -> None:
    held = HeldTrustRootFile(tmp_path / "trust_root.json")
    held.save(RootChain().versions[1])
    os.chown(held.path, DAEMON_UID, DAEMON_UID)
    with pytest.raises(DaemonStateError, match=f"owner uid {DAEMON_UID}"):
        held.load()
    shown = HeldTrustRootFile(held.path, daemon_uid=DAEMON_UID).load()
    assert shown is not None and shown.version == 1
