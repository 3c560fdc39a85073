"""`nachtwacht agent enroll` as the admin types it: a problem is named by its flag (never by the
staging copy of the config), a proxy taken from this shell's environment is written into the
config (the service does not see the shell), and `--agent-user` is kept for the updater. Real
processes against a TLS control plane and real proxies on loopback."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tests.agent_daemon.network_support.pki import Pki, make_pki
from tests.agent_daemon.network_support.proxies import http_proxy
from tests.agent_daemon.network_support.servers import control_plane
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
