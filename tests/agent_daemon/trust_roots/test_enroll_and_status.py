"""`nachtwacht agent enroll --trust-root FILE` and what `status` says of the root held: real
processes, a real control plane on the embedded PostgreSQL, loopback HTTP."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import tomllib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from signed_release.trust_root import new_trust_root
from tests.agent_daemon.trust_roots.chain import RootChain, signed_by
from tests.worlds.daemons import run_agent
from tests.worlds.hosts import AgentHost

pytestmark = pytest.mark.slow


def _enroll_with_root(
    host: AgentHost, url: str, credential: str, root: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    """`agent enroll` with a trust root and no key file."""
    return run_agent(
        "enroll", "--state-dir", str(host.state_dir), "--url", url, "--credential", credential,
        "--trust-root", str(root), "--install-root", str(host.install_root),
        "--restart-command", "true", *extra,
    )  # fmt: skip


def _root_file(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "root.json"
    path.write_bytes(data)
    return path


@pytest.fixture
def plane_and_key(control_plane_server: Callable[..., Any]) -> tuple[Any, str]:
    plane = control_plane_server()
    org = plane.create_org("Acme")
    return plane, plane.enroll_agent(org["org_id"], "web-01")["agent_key"]


def test_enroll_with_a_trust_root_holds_it_and_needs_no_key_file(
    plane_and_key: tuple[Any, str], tmp_path: Path
) -> None:
    plane, credential = plane_and_key
    chain = RootChain()
    host = AgentHost(tmp_path / "host")
    result = _enroll_with_root(
        host, plane.base_url, credential, _root_file(tmp_path, chain.versions[1])
    )
    assert result.returncode == 0, result.stderr
    held = host.state_dir / "trust_root.json"
    assert held.read_bytes() == chain.versions[1]
    assert stat.S_IMODE(os.stat(held).st_mode) == 0o644
    assert tomllib.loads((host.state_dir / "agent.toml").read_text())["trusted_keys"] == []

    status = host.status()
    assert status.returncode == 0, status.stderr
    assert "trust root:    v1, expires 2030-01-01 01:00 CET" in status.stdout
    document = json.loads(host.status("--json").stdout)
    assert document["trust_root"] == {
        "version": 1,
        "expires": "2030-01-01T00:00:00Z",
        "expired": False,
    }


def test_status_of_a_host_on_key_files_says_it_holds_no_root(
    plane_and_key: tuple[Any, str], tmp_path: Path
) -> None:
    plane, credential = plane_and_key
    host = AgentHost(tmp_path / "host")
    assert host.enroll(plane.base_url, credential).returncode == 0
    status = host.status()
    assert "trust root:    none (trusted-key files)" in status.stdout
    assert json.loads(host.status("--json").stdout)["trust_root"] is None


def test_status_warns_of_a_root_expiring_within_thirty_days(
    plane_and_key: tuple[Any, str], tmp_path: Path
) -> None:
    plane, credential = plane_and_key
    soon = datetime.now(UTC).replace(microsecond=0) + timedelta(days=10)
    chain = RootChain(expires=soon)
    host = AgentHost(tmp_path / "host")
    root = _root_file(tmp_path, chain.versions[1])
    assert _enroll_with_root(host, plane.base_url, credential, root).returncode == 0
    status = host.status().stdout
    attention = status.split("attention:", 1)[1].split("daemon:", 1)[0]
    assert "the trust root v1 expires at" in attention
    assert "publish a newer trust root" in attention


def _below_threshold() -> bytes:
    chain = RootChain()
    unsigned = new_trust_root(
        version=1,
        expires=chain.expires,
        root_keys=[key.public_key() for key in chain.root_keys],
        root_threshold=2,
        release_keys=[chain.release_key.public_key()],
    )
    return signed_by(unsigned, chain.root_keys[:1])


@pytest.mark.parametrize(
    ("root", "expected"),
    [
        pytest.param(_below_threshold, "1 valid signatures by its own root keys", id="one_of_two"),
        pytest.param(
            lambda: RootChain(expires=datetime(2026, 1, 1, tzinfo=UTC)).versions[1],
            "trust root v1 expired at 2026-01-01T00:00:00Z",
            id="expired",
        ),
        pytest.param(lambda: b"not json", "not TUF root metadata", id="garbage"),
    ],
)
def test_enroll_refuses_a_root_it_cannot_trust_and_writes_nothing(
    tmp_path: Path, root: Callable[[], bytes], expected: str
) -> None:
    host = AgentHost(tmp_path / "host")
    path = _root_file(tmp_path, root())
    # Refused before the control plane is asked: the URL leads nowhere.
    result = _enroll_with_root(host, "http://127.0.0.1:9", "nwa_0123456789abcdef", path)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"nachtwacht agent enroll: --trust-root: {path}: ")
    assert expected in line
    assert not (host.state_dir / "trust_root.json").exists()
    assert not (host.state_dir / "agent.toml").exists()


def test_enroll_without_a_root_or_a_key_file_names_both(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    result = run_agent(
        "enroll", "--state-dir", str(host.state_dir), "--url", "http://127.0.0.1:9",
        "--credential", "nwa_0123456789abcdef",
    )  # fmt: skip
    assert result.returncode == 2
    assert "--trusted-key / --trust-root: found neither" in result.stderr


def test_a_failed_enroll_leaves_no_trust_root_and_no_folder_behind(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    root = _root_file(tmp_path, RootChain().versions[1])
    result = _enroll_with_root(host, "http://127.0.0.1:9", "nwa_0123456789abcdef", root)
    assert result.returncode == 2
    assert "cannot connect" in result.stderr
    assert not (host.state_dir / "trust_root.json").exists()
    # The state directory this enroll made for the root is gone again.
    assert not host.state_dir.exists()


def test_an_unknown_credential_leaves_neither_folder_it_made_but_keeps_one_that_was_there(
    plane_and_key: tuple[Any, str], tmp_path: Path
) -> None:
    plane, _ = plane_and_key
    host = AgentHost(tmp_path / "host")
    etc = tmp_path / "etc"
    etc.mkdir()
    config = etc / "nachtwacht-agent" / "agent.toml"
    root = _root_file(tmp_path, RootChain().versions[1])
    result = _enroll_with_root(
        host, plane.base_url, "nwa_never_issued_0123456789", root, "--config", str(config)
    )
    assert result.returncode == 2
    assert "refused the credential given" in result.stderr
    assert not config.parent.exists()
    assert not host.state_dir.exists()
    assert etc.is_dir()
