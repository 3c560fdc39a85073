"""The network settings as a customer's admin meets them: `nachtwacht agent enroll | run | status`
as real processes against a TLS control plane with a private CA and real proxies on loopback.
Every refusal is one line `nachtwacht agent <command>: …` on stderr with exit 2 — except `run`,
whose lines carry journald's error priority (`<3>`) and which exits 78 for a configuration it
cannot use, so systemd does not restart it in a loop."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from agent_daemon.commands.run_cli import EXIT_CONFIG_ERROR
from agent_daemon.settings import render_config, write_config
from tests.agent_daemon.network_support.pki import Pki, make_pki
from tests.agent_daemon.network_support.proxies import http_proxy, socks5_proxy
from tests.agent_daemon.network_support.servers import AGENT_ID, control_plane
from tests.worlds.daemons import run_agent
from tests.worlds.hosts import AgentHost
from tests.worlds.processes import REPO_ROOT, child_environment

pytestmark = pytest.mark.slow

CREDENTIAL = "nwa_the_agents_credential"


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


def refused(command: str) -> int:
    """The exit status of a command refusing the config it was given."""
    return EXIT_CONFIG_ERROR if command == "run" else 2


def lines_of(stderr: str, command: str) -> list[str]:
    """stderr's lines without `run`'s error priority, which each of its lines must carry."""
    lines = stderr.strip().splitlines()
    if command == "run":
        assert all(line.startswith("<3>") for line in lines), stderr
        lines = [line.removeprefix("<3>") for line in lines]
    return lines


def one_line(stderr: str, command: str) -> str:
    lines = lines_of(stderr, command)
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"nachtwacht agent {command}: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_enroll_against_a_private_ca_without_ca_file_names_the_fix(
    pki: Pki, tmp_path: Path
) -> None:
    host = AgentHost(tmp_path / "host")
    with control_plane(pki) as plane:
        result = host.enroll(plane.url, CREDENTIAL)
    assert result.returncode == 2
    line = one_line(result.stderr, "enroll")
    assert "the control plane's certificate is not trusted (" in line
    assert "pass --ca-file (ca_file in agent.toml) or fix the host's trust store" in line
    assert not (host.state_dir / "agent.toml").exists()


def test_enroll_through_a_socks_proxy_with_ca_file_pin_and_client_certificate(
    pki: Pki, tmp_path: Path
) -> None:
    host = AgentHost(tmp_path / "host")
    with (
        control_plane(pki, require_client_cert=True) as plane,
        socks5_proxy({"control.example": plane.port}, scheme="socks5h") as proxy,
    ):
        result = host.enroll(
            plane.url_for("control.example"), CREDENTIAL,
            "--proxy", proxy.url, "--no-proxy", "localhost,10.0.0.0/8",
            "--ca-file", str(pki.ca), "--pinned-public-key-sha256", pki.server_pin,
            "--client-cert", str(pki.client_cert), "--client-key", str(pki.client_key),
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert proxy.destinations == [f"control.example:{plane.port}"]
        assert len(plane.requests) == 1
    assert f"control plane reached via {proxy.url} (agent.toml proxy)" in result.stdout
    document = tomllib.loads((host.state_dir / "agent.toml").read_text())
    assert document["agent_id"] == str(AGENT_ID)
    assert document["proxy"] == proxy.url
    assert document["no_proxy"] == ["localhost", "10.0.0.0/8"]
    assert document["ca_file"] == str(pki.ca)
    assert document["pinned_public_key_sha256"] == pki.server_pin
    assert (document["client_cert"], document["client_key"]) == (
        str(pki.client_cert),
        str(pki.client_key),
    )
    assert "insecure_http" not in document

    status = host.status()
    assert status.returncode == 0, status.stderr
    # Status contacts nothing: it names the configured route, not one it just took.
    assert f"network:       configured route: via {proxy.url} (agent.toml proxy)" in (status.stdout)
    assert "reached" not in status.stdout
    assert "no proxy for:  localhost, 10.0.0.0/8" in status.stdout
    assert f"trust:         the OS trust store + ca_file {pki.ca}; public key pinned" in (
        status.stdout
    )
    as_json = host.status("--json")
    assert f'"route": "via {proxy.url} (agent.toml proxy)"' in as_json.stdout


def test_enroll_refuses_plain_http_to_a_remote_host(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    result = host.enroll("http://control.example", CREDENTIAL)
    assert result.returncode == 2
    line = one_line(result.stderr, "enroll")
    assert "--url: 'http://control.example' is plain http" in line
    assert "use https://, or allow it with --insecure-http (insecure_http = true)" in line


def test_plain_http_allowed_explicitly_is_warned_at_every_start(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    with control_plane(None) as plane, http_proxy({"control.example": plane.port}) as proxy:
        result = host.enroll(
            plane.url_for("control.example"), CREDENTIAL, "--proxy", proxy.url, "--insecure-http"
        )
        assert result.returncode == 0, result.stderr
        assert tomllib.loads((host.state_dir / "agent.toml").read_text())["insecure_http"] is True
        for start in (1, 2):
            daemon = host.start()
            try:
                configured = daemon.wait_for("network.configured")
                warning = daemon.wait_for("network.insecure_http")
                daemon.wait_for("daemon.ready")  # its signal handlers are in place
            finally:
                assert daemon.terminate() == 0, f"start {start}: {daemon.stderr()}"
            assert configured["route"] == f"via {proxy.url} (agent.toml proxy)"
            assert warning["level"] == "warning"
            assert "travels in clear" in warning["message"]


def test_loopback_over_plain_http_is_not_warned(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    with control_plane(None) as plane:
        assert host.enroll(plane.url_for("127.0.0.1"), CREDENTIAL).returncode == 0
        daemon = host.start()
        try:
            configured = daemon.wait_for("network.configured")
            daemon.wait_for("daemon.ready")
        finally:
            daemon.terminate()
    assert configured["route"] == "direct (no proxy configured)"
    assert daemon.named("network.insecure_http") == []


# -- a config `run` and `status` cannot use: one line each ----------------------------------------


def write_enrolled_config(host: AgentHost, **extra: str | bool) -> Path:
    config = host.state_dir / "agent.toml"
    host.prepare()
    write_config(
        config,
        render_config(
            {
                "control_url": "https://control.example",
                "credential": CREDENTIAL,
                "agent_id": str(AGENT_ID),
                "trusted_keys": [str(host.public_key)],
                "install_root": str(host.install_root),
                "platform": "linux-x86_64",
                "channel": "stable",
                "restart_command": ["true"],
                "health_command": ["true"],
                "health_deadline_seconds": 10.0,
                **extra,
            }
        ),
    )
    return config


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        pytest.param({"proxy": "ftp://proxy:21"}, "proxy: found 'ftp://proxy:21' — expected a "
                     "proxy URL", id="bad_proxy"),
        pytest.param({"control_url": "http://control.example"}, "control_url: "
                     "'http://control.example' is plain http", id="plain_http"),
        pytest.param({"ca_file": "/nonexistent/ca.pem"}, "ca_file: '/nonexistent/ca.pem' cannot "
                     "be read (No such file or directory)", id="missing_ca_file"),
        pytest.param({"pinned_public_key_sha256": "abc"}, "pinned_public_key_sha256: found 'abc' "
                     "— expected the sha256", id="bad_pin"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("command", ["run", "status"])
def test_a_network_field_run_and_status_cannot_use_is_one_line(
    tmp_path: Path, command: str, extra: dict[str, str], expected: str
) -> None:
    host = AgentHost(tmp_path / "host")
    config = write_enrolled_config(host, **extra)
    result = run_agent(command, "--state-dir", str(host.state_dir))
    assert result.returncode == refused(command)
    line = one_line(result.stderr, command)
    assert line.startswith(f"nachtwacht agent {command}: {config}: {expected}")


def test_a_client_key_others_can_read_is_refused(pki: Pki, tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    os.chmod(pki.client_key, 0o644)
    write_enrolled_config(host, client_cert=str(pki.client_cert), client_key=str(pki.client_key))
    result = run_agent("run", "--state-dir", str(host.state_dir))
    assert result.returncode == EXIT_CONFIG_ERROR
    assert "client_key: " in one_line(result.stderr, "run")
    assert "mode 0644, so other users can read the agent's private key" in result.stderr


def test_a_ca_file_others_can_write_is_refused(pki: Pki, tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    os.chmod(pki.ca, 0o666)  # noqa: S103  # the permissive mode is the attack
    write_enrolled_config(host, ca_file=str(pki.ca))
    result = run_agent("status", "--state-dir", str(host.state_dir))
    assert result.returncode == 2
    assert "ca_file: " in one_line(result.stderr, "status")
    assert "has mode 0666" in result.stderr
    assert "not writable by group or others" in result.stderr


def test_a_socks_proxy_in_the_environment_without_socks_support_is_one_line(
    tmp_path: Path,
) -> None:
    """Before: ALL_PROXY=socks5://… made `agent run` die with a traceback (a restart loop)."""
    host = AgentHost(tmp_path / "host")
    write_enrolled_config(host)
    # The host's Python without httpx's socks extra: socksio cannot be imported.
    script = (
        "import sys; sys.modules['socksio'] = None; from nachtwacht.cli import main; "
        f"raise SystemExit(main(['agent', 'run', '--state-dir', {str(host.state_dir)!r}]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=child_environment({"ALL_PROXY": "socks5://127.0.0.1:1080"}),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == EXIT_CONFIG_ERROR
    assert one_line(result.stderr, "run") == (
        "nachtwacht agent run: environment ALL_PROXY: 'socks5://127.0.0.1:1080' is a SOCKS proxy, "
        "but SOCKS support is not installed: pip install 'httpx[socks]' (the agent's package "
        "has it)"
    )


def test_every_line_of_a_config_with_several_bad_fields_has_the_one_format(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    config = write_enrolled_config(host, proxy="ftp://x:1", no_proxy=["bad host!"])
    for command in ("run", "status"):
        result = run_agent(command, "--state-dir", str(host.state_dir))
        assert result.returncode == refused(command)
        lines = lines_of(result.stderr, command)
        assert [line.split(": ")[2] for line in lines] == ["proxy", "no_proxy.0"], lines
        for line in lines:
            assert line.startswith(f"nachtwacht agent {command}: {config}: ")


def test_a_usage_error_has_the_one_format(tmp_path: Path) -> None:
    result = run_agent("enroll", "--state-dir", str(tmp_path / "host"))
    assert result.returncode == 2
    assert one_line(result.stderr, "enroll").endswith(
        "the following arguments are required: --url, --credential"
    )


def test_the_daemon_logs_a_pin_mismatch_as_offline_with_the_fix(pki: Pki, tmp_path: Path) -> None:
    """Under systemd nobody reads stderr: the minute's log line carries the sentence."""
    host = AgentHost(tmp_path / "host")
    with control_plane(pki) as plane:
        write_enrolled_config(
            host,
            control_url=plane.url,
            ca_file=str(pki.ca),
            pinned_public_key_sha256="22" * 32,
        )
        daemon = host.start(fake_clock=f"2026-11-30T01:00:00Z,anchor={time.time()},speed=60")
        try:
            offline = daemon.wait_for("control_plane.offline")
        finally:
            daemon.terminate()
        assert plane.requests == []
    assert (
        "the control plane's public key does not match pinned_public_key_sha256"
        in (offline["error"])
    )
