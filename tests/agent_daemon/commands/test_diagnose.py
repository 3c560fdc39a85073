"""`nachtwacht agent diagnose`: the archive support asks for, opened and read — and no secret in
it: not the credential, not the proxy's password, not a signed URL's query."""

from __future__ import annotations

import json
import os
import secrets
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from agent_daemon.disk.atomic_file import write_versioned_json
from control_plane.accounts.credentials import Audience, new_secret
from control_plane.enrollment.rules import new_token_secret
from tests.agent_daemon.commands.enrollment_stand_in import stand_in_plane
from tests.agent_daemon.commands.install_support import FakeSystemd, install
from tests.agent_daemon.commands.test_network_cli import write_enrolled_config
from tests.worlds.daemons import run_agent
from tests.worlds.hosts import AgentHost

pytestmark = pytest.mark.slow

CREDENTIAL = "nwa_the_agents_credential"
PROXY_PASSWORD = "pr0xy-s3cret"


def members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        read = {}
        for member in tar.getmembers():
            extracted = tar.extractfile(member)
            assert extracted is not None
            read[member.name.split("/", 1)[1]] = extracted.read()
        return read


def test_the_archive_has_no_secret_and_says_what_it_could_not_reach(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    # Nothing listens on port 9: the connectivity test fails through the proxy, and says so.
    write_enrolled_config(
        host,
        control_url="https://control.example",
        proxy=f"http://agent:{PROXY_PASSWORD}@127.0.0.1:9",
    )
    # A report waiting in the outbox, and an update in progress with a signed mirror URL.
    write_versioned_json(
        host.state_dir / "outbox" / "000001.json",
        {"method": "POST", "path": "/v1/agent/runs", "body": {"status": "up_to_date"}},
        format_version=1,
    )
    (host.state_dir / "notes.json").write_text(
        json.dumps({"artifact_url": "https://mirror.example/a.tar.gz?X-Amz-Signature=abc123"})
    )
    archive = tmp_path / "support.tar.gz"
    # No journalctl on this PATH: the archive says so instead of failing.
    result = run_agent(
        "diagnose", "--state-dir", str(host.state_dir), "--out", str(archive),
        env={"PATH": str(tmp_path / "empty-bin")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(archive)
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
    read = members(archive)
    everything = b"".join(read.values())
    assert CREDENTIAL.encode() not in everything
    assert PROXY_PASSWORD.encode() not in everything
    assert b"abc123" not in everything
    assert {"versions.txt", "config.toml", "status.json", "journal.txt", "connectivity.txt"} <= set(
        read
    )
    assert b'credential = "<redacted>"' in read["config.toml"]
    assert b'proxy = "http://agent:***@127.0.0.1:9"' in read["config.toml"]
    assert read["journal.txt"].startswith(b"journalctl: not found on this host")
    assert b"python " in read["versions.txt"]
    assert b"config poll: failed: GET /v1/agent/config: cannot connect" in read["connectivity.txt"]
    assert "state/outbox/000001.json" in read
    assert json.loads(read["status.json"])["agent_id"]


def test_the_connectivity_test_reports_the_answer(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    systemd = FakeSystemd(tmp_path / "systemd")
    with stand_in_plane() as plane:
        assert install(host, systemd, plane.url, plane.token(), "--no-start").returncode == 0
        archive = tmp_path / "support.tar.gz"
        result = run_agent(
            "diagnose", "--state-dir", str(host.state_dir), "--out", str(archive),
            env=systemd.env(),
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    [credential] = plane.agents
    read = members(archive)
    assert credential.encode() not in b"".join(read.values())
    assert b"config poll: answered in " in read["connectivity.txt"]
    assert b"(agent web-01)" in read["connectivity.txt"]
    assert "state/config-cache.json" in read


def test_an_existing_archive_is_never_replaced(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    write_enrolled_config(host)
    archive = tmp_path / "support.tar.gz"
    archive.write_text("mine")
    result = run_agent("diagnose", "--state-dir", str(host.state_dir), "--out", str(archive))
    assert result.returncode == 2
    assert f"--out: {archive} already exists" in result.stderr
    assert archive.read_text() == "mine"
    assert os.access(archive, os.R_OK)


def test_a_config_that_is_not_toml_is_left_out_not_copied(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    config = write_enrolled_config(host)
    config.write_text(config.read_text() + "\nthis is [not toml\n")
    archive = tmp_path / "support.tar.gz"
    result = run_agent("diagnose", "--state-dir", str(host.state_dir), "--out", str(archive))
    assert result.returncode == 0, result.stderr
    read = members(archive)
    assert CREDENTIAL.encode() not in b"".join(read.values())
    assert b"not valid TOML" in read["config.toml"]
    assert b"not included" in read["config.toml"]
    assert read["connectivity.txt"].startswith(b"not tried: the config cannot be used")


def _files_under(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every entry under `root`, not following links: its mode and, for a regular file, its
    bytes (what must be unchanged after a command)."""
    seen: dict[str, tuple[int, bytes | None]] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        data = path.read_bytes() if stat.S_ISREG(info.st_mode) else None
        seen[str(path.relative_to(root))] = (info.st_mode, data)
    return seen


def _diagnose_within(
    state_dir: Path, archive: Path, *, seconds: float
) -> subprocess.CompletedProcess[str]:
    # Forked by hand, with a deadline: a command that opened a named pipe would wait forever.
    return subprocess.run(
        [sys.executable, "-m", "nachtwacht", "agent", "diagnose", "--state-dir", str(state_dir),
         "--out", str(archive)],
        env={**os.environ, "PATH": str(archive.parent / "empty-bin")},
        capture_output=True, text=True, timeout=seconds, check=False,
    )  # fmt: skip


def test_links_pipes_and_devices_in_the_state_directory_are_named_not_read(tmp_path: Path) -> None:
    # The non-root daemon's user owns the state directory: what it plants there must not carry
    # root's files (or a hang) into the archive root makes.
    host = AgentHost(tmp_path / "host")
    write_enrolled_config(host)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "shadow").write_text("root:$6$the-hash-of-roots-password:19000:0:99999:7:::\n")
    (outside / "folder").mkdir()
    (outside / "folder" / "other.json").write_text('{"found": "outside-folder-secret"}')
    state = host.state_dir
    (state / "stolen.json").symlink_to(outside / "shadow")
    (state / "outbox").mkdir(exist_ok=True)
    (state / "outbox" / "000002.json").symlink_to(outside / "shadow")
    (state / "linked").symlink_to(outside / "folder", target_is_directory=True)
    os.mkfifo(state / "pipe.json")
    (state / "zeros.json").symlink_to("/dev/zero")
    before = _files_under(tmp_path / "host") | _files_under(outside)
    archive = tmp_path / "support.tar.gz"
    result = _diagnose_within(state, archive, seconds=60)
    assert result.returncode == 0, result.stderr
    read = members(archive)
    everything = b"".join(read.values())
    assert b"the-hash-of-roots-password" not in everything
    assert b"outside-folder-secret" not in everything
    for name in ("stolen.json", "outbox/000002.json", "pipe.json", "zeros.json"):
        assert f"state/{name}" not in read
        assert b"not a regular file; not read" in read[f"state/{name}.skipped.txt"], name
    assert not any(name.startswith("state/linked/") for name in read)
    assert _files_under(tmp_path / "host") | _files_under(outside) == before


def test_secrets_outside_the_config_are_scrubbed_too(tmp_path: Path) -> None:
    # An older credential in a renamed copy of the config, an enrollment token and a proxy
    # password in an event line kept in a state file, a client key pasted into one: none of them
    # is the config's, and none may leave the host.
    host = AgentHost(tmp_path / "host")
    write_enrolled_config(host)
    state = host.state_dir
    old_credential = "nwa_" + "Q" * 43
    token = new_token_secret()
    (state / "agent.toml.bak.json").write_text(f'credential = "{old_credential}"\n')
    (state / "events.json").write_text(
        json.dumps(
            {
                "line": f"enroll with {token} via http://ops:env-proxy-pass@proxy.example:3128",
                "key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEF\n"
                "-----END PRIVATE KEY-----\n",
            }
        )
    )
    archive = tmp_path / "support.tar.gz"
    result = _diagnose_within(state, archive, seconds=120)
    assert result.returncode == 0, result.stderr
    everything = b"".join(members(archive).values())
    for secret in (old_credential, token, "env-proxy-pass", "MIIEvQIBADANBgkqhkiG9w0BAQEF"):
        assert secret.encode() not in everything, secret
    assert CREDENTIAL.encode() not in everything
    assert b"http://ops:***@proxy.example:3128" in everything


def test_a_config_that_is_a_named_pipe_is_named_and_nothing_waits_on_it(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    config = write_enrolled_config(host)
    config.unlink()
    os.mkfifo(config, 0o600)
    archive = tmp_path / "support.tar.gz"
    result = _diagnose_within(host.state_dir, archive, seconds=60)
    assert result.returncode == 0, result.stderr
    read = members(archive)
    assert read["config.toml"] == f"# {config}: not a regular file; not read\n".encode()
    assert b"not a regular file" in read["status.json"]
    assert read["connectivity.txt"].startswith(b"not tried: the config cannot be used")
    assert stat.S_ISFIFO(config.lstat().st_mode)


# Harmless text that only looks like a secret: a prefix `nw?_` and a run of token characters,
# but not the 43 random characters the control plane issues after it. An engineer needs these.
LOOK_ALIKES = (
    "/srv/nwd_backups_2026-12-01/agent.tar.gz",
    "provibr-agent nwb_release_candidate_7 started",
    "loaded plugin nwa_compat_layer_20261201",
    "module nwh_delivery_queue_worker ready",
    # A real secret's length, glued to more token characters: not a secret's shape either.
    "id nwo_" + "k" * 43 + "_suffix kept",
)


def test_the_scrub_removes_secrets_by_their_shape_and_keeps_look_alikes(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    write_enrolled_config(host, proxy=f"http://agent:{PROXY_PASSWORD}@127.0.0.1:9")
    # The secrets the control plane issues, made by its own code (the webhook's by its rule).
    found = [
        new_secret(Audience.AGENT),
        new_secret(Audience.PANEL),
        new_secret(Audience.OPERATOR),
        new_token_secret(),
        "nwh_" + secrets.token_urlsafe(32),
    ]
    lines = [
        f"Dec 06 03:00:01 host agent[1]: enroll with {found[3]} failed",
        f"Dec 06 03:00:02 host agent[1]: Authorization: Bearer {found[0]}",
        f"Dec 06 03:00:03 host agent[1]: keys {found[1]},{found[2]};webhook={found[4]}.",
        f"Dec 06 03:00:04 host agent[1]: config credential {CREDENTIAL} and {PROXY_PASSWORD}",
        *(f"Dec 06 03:00:05 host agent[1]: {text}" for text in LOOK_ALIKES),
    ]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    journal = tmp_path / "journal.txt"
    journal.write_text("\n".join(lines) + "\n")
    journalctl = bin_dir / "journalctl"
    journalctl.write_text(f"#!/bin/sh\nexec cat {journal}\n")
    journalctl.chmod(0o755)
    (host.state_dir / "events.json").write_text(json.dumps({"lines": lines}))
    archive = tmp_path / "support.tar.gz"
    result = run_agent(
        "diagnose", "--state-dir", str(host.state_dir), "--out", str(archive),
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    read = members(archive)
    everything = b"".join(read.values())
    for secret in (*found, CREDENTIAL, PROXY_PASSWORD):
        assert secret.encode() not in everything, secret
        assert secret[4:].encode() not in everything, secret
    for text in LOOK_ALIKES:
        assert text.encode() in read["journal.txt"], text
        assert text.encode() in read["state/events.json"], text
    kept = read["journal.txt"].decode().splitlines()
    assert kept[0] == "Dec 06 03:00:01 host agent[1]: enroll with <redacted> failed"
    assert kept[1] == "Dec 06 03:00:02 host agent[1]: Authorization: Bearer <redacted>"
    assert kept[2] == (
        "Dec 06 03:00:03 host agent[1]: keys <redacted>,<redacted>;webhook=<redacted>."
    )
    assert kept[3] == "Dec 06 03:00:04 host agent[1]: config credential <redacted> and <redacted>"
