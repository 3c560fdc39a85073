"""`nachtwacht agent enroll` as the admin types it: a problem is named by its flag (never by the
staging copy of the config), a proxy taken from this shell's environment is written into the
config (the service does not see the shell), and `--agent-user` is kept for the updater. Real
processes against a TLS control plane and real proxies on loopback."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from agent_daemon.connection.network_settings import MAX_PEM_FILE_BYTES
from agent_daemon.disk.held_trust_root import MAX_TRUST_ROOT_FILE_BYTES
from tests.agent_daemon.network_support.pki import Pki, make_pki
from tests.agent_daemon.network_support.proxies import http_proxy
from tests.agent_daemon.network_support.servers import control_plane
from tests.agent_daemon.trust_roots.chain import RootChain
from tests.worlds.hosts import AgentHost

pytestmark = pytest.mark.slow

CREDENTIAL = "nwa_the_agents_credential"
# No proxy variable of the machine running the tests may leak into a case.
NO_PROXY_ENV = {
    name: "" for name in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy",
                          "ALL_PROXY", "no_proxy", "NO_PROXY")
}  # fmt: skip


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        pytest.param(["--proxy", "ftp://proxy:21"], "--proxy: found 'ftp://proxy:21' — expected a "
                     "proxy URL", id="bad_proxy"),
        pytest.param(["--no-proxy", "bad host!"], "--no-proxy: found 'bad host!' — expected a "
                     "host name", id="bad_no_proxy"),
        pytest.param(["--pinned-public-key-sha256", "abc"], "--pinned-public-key-sha256: found "
                     "'abc' — expected the sha256", id="bad_pin"),
        pytest.param(["--ca-file", "/nonexistent/ca.pem"], "--ca-file: '/nonexistent/ca.pem' "
                     "cannot be read", id="missing_ca_file"),
        pytest.param(["--channel", "Not A Channel"], "--channel: found 'Not A Channel'",
                     id="bad_channel"),
    ],
)  # fmt: skip
def test_an_enroll_error_names_the_flag_not_the_staging_file(
    tmp_path: Path, extra: list[str], expected: str
) -> None:
    host = AgentHost(tmp_path / "host")
    result = host.enroll("https://control.example", CREDENTIAL, *extra)
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert line.startswith(f"nachtwacht agent enroll: {expected}"), line
    assert ".agent.toml.enroll" not in result.stderr


def test_a_proxy_from_https_proxy_is_written_into_the_config(pki: Pki, tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    with control_plane(pki) as plane, http_proxy({"control.example": plane.port}) as proxy:
        env = {**NO_PROXY_ENV, "HTTPS_PROXY": proxy.url, "NO_PROXY": "mirror.example"}
        result = host.enroll(
            plane.url_for("control.example"), CREDENTIAL, "--ca-file", str(pki.ca), env=env
        )
        assert result.returncode == 0, result.stderr
        assert proxy.destinations == [f"control.example:{plane.port}"]
    document = tomllib.loads((host.state_dir / "agent.toml").read_text())
    assert document["proxy"] == proxy.url
    assert document["no_proxy"] == ["mirror.example"]
    assert (
        f"proxy {proxy.url} taken from this shell's HTTPS_PROXY and written to the config: the "
        "service does not see this shell's environment (--proxy '' for none)"
    ) in result.stdout
    assert f"control plane reached via {proxy.url} (agent.toml proxy)" in result.stdout


def test_a_proxy_password_from_the_environment_is_not_printed(pki: Pki, tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    with control_plane(pki) as plane:
        env = {**NO_PROXY_ENV, "HTTPS_PROXY": "http://agent:pr0xy-s3cret@127.0.0.1:9"}
        result = host.enroll(plane.url, CREDENTIAL, "--ca-file", str(pki.ca), env=env)
    # Nothing listens on port 9: the enroll fails, through the proxy it would keep.
    assert result.returncode == 2
    assert "pr0xy-s3cret" not in result.stdout + result.stderr
    assert "http://agent:***@127.0.0.1:9" in result.stdout


def test_proxy_empty_means_none_even_with_https_proxy_set(pki: Pki, tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    with control_plane(pki) as plane, http_proxy({}) as proxy:
        env = {**NO_PROXY_ENV, "HTTPS_PROXY": proxy.url}
        result = host.enroll(
            plane.url, CREDENTIAL, "--ca-file", str(pki.ca), "--proxy", "", env=env
        )
        assert result.returncode == 0, result.stderr
        assert proxy.destinations == []
    document = tomllib.loads((host.state_dir / "agent.toml").read_text())
    assert "proxy" not in document
    assert "control plane reached direct (no proxy configured)" in result.stdout


def test_a_control_url_no_proxy_bypasses_takes_no_proxy_from_the_environment(
    pki: Pki, tmp_path: Path
) -> None:
    host = AgentHost(tmp_path / "host")
    with control_plane(pki) as plane, http_proxy({}) as proxy:
        env = {**NO_PROXY_ENV, "HTTPS_PROXY": proxy.url}
        result = host.enroll(
            plane.url, CREDENTIAL, "--ca-file", str(pki.ca), "--no-proxy", "localhost", env=env
        )
        assert result.returncode == 0, result.stderr
        assert proxy.destinations == []
    assert "proxy" not in tomllib.loads((host.state_dir / "agent.toml").read_text())


def test_the_agent_user_is_kept_for_the_updater(pki: Pki, tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    with control_plane(pki) as plane:
        env = dict(NO_PROXY_ENV)
        result = host.enroll(
            plane.url, CREDENTIAL, "--ca-file", str(pki.ca), "--agent-user", "nobody", env=env
        )
    assert result.returncode == 0, result.stderr
    assert tomllib.loads((host.state_dir / "agent.toml").read_text())["agent_user"] == "nobody"


def test_an_agent_user_the_host_does_not_have_is_refused_by_its_flag(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    result = host.enroll("https://control.example", CREDENTIAL, "--agent-user", "no-such-user")
    assert result.returncode == 2
    assert one_line(result.stderr).startswith(
        "nachtwacht agent enroll: --agent-user: 'no-such-user' is not a user on this host"
    )
    assert not (host.state_dir / "agent.toml").exists()


def _entries(root: Path, *, skip: Path | None = None) -> dict[str, tuple[int, bytes | None]]:
    """Every entry under `root` with its mode and bytes; `skip` (too large to read) left out."""
    seen: dict[str, tuple[int, bytes | None]] = {}
    for path in sorted(root.rglob("*")):
        if path == skip:
            continue
        info = path.lstat()
        data = path.read_bytes() if stat.S_ISREG(info.st_mode) else None
        seen[str(path.relative_to(root))] = (info.st_mode, data)
    return seen


def _enroll_within(host: AgentHost, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    # Forked by hand, with a deadline: an enroll that opened a named pipe would wait forever.
    return subprocess.run(
        [sys.executable, "-m", "nachtwacht", "agent", "enroll", "--state-dir", str(host.state_dir),
         "--url", url, "--credential", CREDENTIAL, "--install-root", str(host.install_root),
         "--restart-command", "true", *extra],
        env={**os.environ, **NO_PROXY_ENV}, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        pytest.param("https://admin:s3cret-pw@control.example", "--url: found "
                     "'https://admin:***@control.example' — expected no user or password",
                     id="credentials"),
        pytest.param("https://control.example:99999", "--url: found "
                     "'https://control.example:99999' — expected a port from 1 to 65535",
                     id="port_too_big"),
        pytest.param("https://control.example:0", "--url: found 'https://control.example:0' — "
                     "expected a port from 1 to 65535", id="port_zero"),
        pytest.param("https://control.example:-1", "--url: found 'https://control.example:-1' — "
                     "expected a port from 1 to 65535", id="port_negative"),
        pytest.param("https://[::1", "--url: found 'https://[::1' — expected an http(s) URL",
                     id="broken_ipv6"),
        pytest.param("https://control.example/\x1b[2J", "--url: found "
                     "'https://control.example/\\x1b[2J' — expected an http(s) URL",
                     id="escape_sequence"),
        pytest.param("https://:443", "--url: found 'https://:443' — expected an http(s) URL",
                     id="no_host"),
    ],
)  # fmt: skip
def test_a_control_url_that_cannot_be_used_is_one_line_and_nothing_is_written(
    tmp_path: Path, url: str, expected: str
) -> None:
    host = AgentHost(tmp_path / "host")
    host.prepare()
    before = _entries(tmp_path)
    result = _enroll_within(host, url, "--trusted-key", str(host.public_key))
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert line.startswith(f"nachtwacht agent enroll: {expected}"), line
    assert "s3cret-pw" not in result.stderr + result.stdout
    assert _entries(tmp_path) == before


def test_a_proxy_refused_is_shown_without_its_password(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    host.prepare()
    before = _entries(tmp_path)
    result = _enroll_within(
        host, "https://control.example", "--trusted-key", str(host.public_key),
        "--proxy", "http://ops:pr0xy-pw@proxy.example:70000",
    )  # fmt: skip
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert line.startswith(
        "nachtwacht agent enroll: --proxy: found 'http://ops:***@proxy.example:70000' — expected "
        "a port from 1 to 65535"
    ), line
    assert "pr0xy-pw" not in result.stderr + result.stdout
    assert _entries(tmp_path) == before


@pytest.mark.parametrize("flag", ["--ca-file", "--client-cert", "--trusted-key", "--trust-root"])
@pytest.mark.parametrize("kind", ["named_pipe", "device"])
def test_a_file_flag_naming_a_pipe_or_device_is_refused_not_waited_on(
    tmp_path: Path, flag: str, kind: str
) -> None:
    host = AgentHost(tmp_path / "host")
    host.prepare()
    if kind == "named_pipe":
        odd = tmp_path / "odd.pem"
        os.mkfifo(odd, 0o644)
    else:
        odd = tmp_path / "odd.pem"
        odd.symlink_to("/dev/zero")
    before = _entries(tmp_path)
    keys = [] if flag == "--trusted-key" else ["--trusted-key", str(host.public_key)]
    result = _enroll_within(host, "https://control.example", *keys, flag, str(odd))
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert line.startswith(f"nachtwacht agent enroll: {flag}: "), line
    assert str(odd) in line
    assert _entries(tmp_path) == before


@pytest.mark.parametrize("flag", ["--ca-file", "--client-cert", "--client-key"])
def test_a_pem_file_past_its_bound_is_refused_unread_and_nothing_written(
    pki: Pki, tmp_path: Path, flag: str
) -> None:
    host = AgentHost(tmp_path / "host")
    host.prepare()
    huge = tmp_path / "huge.pem"
    with huge.open("wb") as opened:
        opened.write(pki.client_key.read_bytes() if flag == "--client-key" else b"")
        opened.truncate(2 * 1024**3)  # sparse: 2 GiB that take no disk
    huge.chmod(0o600)
    files = {"--ca-file": pki.ca, "--client-cert": pki.client_cert, "--client-key": pki.client_key}
    files[flag] = huge
    before = _entries(tmp_path, skip=huge)
    started = time.monotonic()
    result = _enroll_within(
        host, "https://control.example", "--trusted-key", str(host.public_key),
        *(part for name, path in files.items() for part in (name, str(path))),
    )  # fmt: skip
    assert time.monotonic() - started < 30
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert line == (
        f"nachtwacht agent enroll: {flag}: {str(huge)!r} is larger than {MAX_PEM_FILE_BYTES} "
        "bytes — expected a PEM file"
    ), line
    assert _entries(tmp_path, skip=huge) == before


@pytest.mark.parametrize(
    ("verb", "flag", "secret"),
    [
        pytest.param(
            "enroll", "--credential", "nwa_caf\u00e9-credential", id="credential_not_ascii"
        ),
        pytest.param("enroll", "--credential", "nwa_ab\x7fcdefgh", id="credential_control"),
        pytest.param("enroll", "--credential", "nwe_an-enrollment-token", id="token_as_credential"),
        pytest.param("install", "--enrollment-token", "nwe_caf\u00e9-token", id="token_not_ascii"),
        pytest.param("install", "--enrollment-token", "nwe_ab\x1bcdefgh", id="token_control"),
    ],
)
def test_a_secret_that_cannot_be_sent_is_refused_by_its_flag_and_never_shown(
    tmp_path: Path, verb: str, flag: str, secret: str
) -> None:
    host = AgentHost(tmp_path / "host")
    host.prepare()
    (tmp_path / "units").mkdir()
    before = _entries(tmp_path)
    install = ["--name", "web-01", "--systemd-dir", str(tmp_path / "units")]
    result = subprocess.run(
        [sys.executable, "-m", "nachtwacht", "agent", verb, "--state-dir", str(host.state_dir),
         "--url", "http://127.0.0.1:9", flag, secret, "--trusted-key", str(host.public_key),
         "--install-root", str(host.install_root), "--restart-command", "true",
         *(install if verb == "install" else [])],
        env={**os.environ, **NO_PROXY_ENV}, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert line.startswith(f"nachtwacht agent {verb}: {flag}: "), line
    assert secret not in line
    assert secret[4:] not in line
    assert _entries(tmp_path) == before


def test_a_failed_enroll_never_copies_what_a_planted_trust_root_link_points_at(
    tmp_path: Path,
) -> None:
    # The daemon's user owns the state directory; root enrolls again and the enroll fails: what
    # it puts back must not be a file of root's read through a link.
    host = AgentHost(tmp_path / "host")
    host.prepare()
    host.state_dir.mkdir(parents=True, exist_ok=True)
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$the-hash-of-roots-password:19000:0:99999:7:::\n")
    secret.chmod(0o600)
    planted = host.state_dir / "trust_root.json"
    planted.symlink_to(secret)
    root = tmp_path / "root.json"
    root.write_bytes(RootChain().versions[1])
    before = _entries(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "nachtwacht", "agent", "enroll", "--state-dir", str(host.state_dir),
         "--url", "http://127.0.0.1:9", "--credential", CREDENTIAL, "--trust-root", str(root),
         "--install-root", str(host.install_root), "--restart-command", "true"],
        env={**os.environ, **NO_PROXY_ENV}, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert "the-hash-of-roots-password" not in result.stdout + result.stderr
    for path in host.state_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert b"the-hash-of-roots-password" not in path.read_bytes(), path
    assert line.startswith(f"nachtwacht agent enroll: {planted}: is a symbolic link"), line
    assert _entries(tmp_path) == before


@pytest.mark.parametrize(
    "size", [MAX_TRUST_ROOT_FILE_BYTES + 1, 2 * 1024**3], ids=["bound", "2GiB"]
)
def test_a_held_trust_root_past_its_bound_is_not_read_and_nothing_changes(
    tmp_path: Path, size: int
) -> None:
    # The daemon's user owns the state directory; root enrolls again: the held root it would
    # put back is read within its bound, or the enroll stops before it changes anything.
    host = AgentHost(tmp_path / "host")
    host.prepare()
    host.state_dir.mkdir(parents=True, exist_ok=True)
    planted = host.state_dir / "trust_root.json"
    with planted.open("wb") as opened:
        opened.write(b'{"signed": ')
        opened.truncate(size)  # sparse: takes no disk
    root = tmp_path / "root.json"
    root.write_bytes(RootChain().versions[1])
    before = _entries(tmp_path, skip=planted)
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "nachtwacht", "agent", "enroll", "--state-dir", str(host.state_dir),
         "--url", "http://127.0.0.1:9", "--credential", CREDENTIAL, "--trust-root", str(root),
         "--install-root", str(host.install_root), "--restart-command", "true"],
        env={**os.environ, **NO_PROXY_ENV}, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert time.monotonic() - started < 30
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert line == (
        f"nachtwacht agent enroll: {planted}: larger than {MAX_TRUST_ROOT_FILE_BYTES} bytes — "
        "expected the held trust root (a regular file) or none; nothing was changed"
    ), line
    assert planted.stat().st_size == size
    assert _entries(tmp_path, skip=planted) == before
