"""`nachtwacht agent enroll` pointed at something that is not a control plane, as the admin types
it: one line on stderr saying what answered, through the same client the daemon uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent_daemon.network_support.proxies import http_proxy
from tests.agent_daemon.network_support.servers import control_plane, web_server
from tests.worlds.hosts import AgentHost

pytestmark = pytest.mark.slow

CREDENTIAL = "nwa_the_agents_credential"
PAGE = b"<!DOCTYPE html>\n<html>\n<body>\n<h1>Welcome to nginx!</h1>\n</body>\n</html>\n"


def the_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("nachtwacht agent enroll: "), stderr
    assert "<" not in lines[0]
    return lines[0]


def test_enroll_against_a_web_page_says_it_is_no_control_plane(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    with web_server(200, PAGE) as server:
        result = host.enroll(server.url, CREDENTIAL)
    assert result.returncode == 2
    assert "answered 200 OK with an HTML page: it is not a nachtwacht control plane" in the_line(
        result.stderr
    )


def test_enroll_with_https_to_a_plain_http_port_asks_whether_it_is_http(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    with control_plane(None) as plane:
        result = host.enroll(f"https://localhost:{plane.port}", CREDENTIAL)
    assert result.returncode == 2
    line = the_line(result.stderr)
    assert f"does not speak TLS on that port; is the URL http://localhost:{plane.port}…?" in line
    assert "WRONG_VERSION_NUMBER" not in line


def test_enroll_through_a_proxy_that_wants_credentials_names_the_proxy(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    with control_plane(None) as plane, http_proxy(credentials=("alice", "s3cret")) as proxy:
        result = host.enroll(plane.url_for("127.0.0.1"), CREDENTIAL, "--proxy", proxy.url)
    assert result.returncode == 2
    assert (
        f"the proxy {proxy.url} (agent.toml proxy) refused the proxy credentials (407 Proxy "
        "Authentication Required)"
    ) in the_line(result.stderr)
