"""`nachtwacht agent install` as a customer's admin runs it: a real process against a stand-in
control plane on loopback that answers the enrollment exchange in the contract's shapes, with a
recording `systemctl` first on PATH and a unit directory of the test's own."""

from __future__ import annotations

import os
import stat
import subprocess
import threading
import tomllib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from agent_daemon.commands.unit_files import WRITTEN_BY_BUNDLE, WRITTEN_BY_INSTALL, shipped_unit
from tests.agent_daemon.commands.enrollment_stand_in import StandInPlane, stand_in_plane
from tests.agent_daemon.commands.install_support import FakeSystemd, install
from tests.agent_daemon.trust_roots.chain import RootChain
from tests.worlds.hosts import AgentHost
from tests.worlds.processes import CHECKOUT, nachtwacht_command

pytestmark = pytest.mark.slow


@pytest.fixture
def plane() -> Iterator[StandInPlane]:
    with stand_in_plane() as plane:
        yield plane


@pytest.fixture
def host(tmp_path: Path) -> AgentHost:
    return AgentHost(tmp_path / "host")


@pytest.fixture
def systemd(tmp_path: Path) -> FakeSystemd:
    return FakeSystemd(tmp_path / "systemd")


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("nachtwacht agent install: "), stderr
    assert "Traceback" not in stderr
    return lines[0].removeprefix("nachtwacht agent install: ")


def test_install_exchanges_the_token_writes_the_config_and_starts_the_service(
    plane: StandInPlane, host: AgentHost, systemd: FakeSystemd
) -> None:
    token = plane.token()
    result = install(host, systemd, plane.url, token)
    assert result.returncode == 0, result.stderr
    [(credential, (agent_id, name))] = plane.agents.items()
    assert name == "web-01"
    config = host.state_dir / "agent.toml"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    document = tomllib.loads(config.read_text())
    assert (document["credential"], document["agent_id"]) == (credential, str(agent_id))
    assert token not in config.read_text()
    # The exchange carried the token; the config poll after it the agent's own credential.
    exchange, poll = plane.requests
    assert exchange["headers"]["Authorization"] == f"Bearer {token}"
    assert poll["headers"]["Authorization"] == f"Bearer {credential}"
    assert (host.state_dir / "config-cache.json").exists()
    for unit in ("nachtwacht-agent.service", "provibr-agent.service"):
        written = (systemd.unit_dir / unit).read_bytes()
        assert written == WRITTEN_BY_INSTALL + shipped_unit(unit)
    assert systemd.calls() == [
        "daemon-reload",
        "enable provibr-agent.service",
        "enable --now nachtwacht-agent.service",
    ]
    assert f"enrolled agent web-01 ({agent_id})" in result.stdout
    assert "started nachtwacht-agent.service" in result.stdout


def test_a_single_use_token_is_refused_the_second_time_in_one_line(
    plane: StandInPlane, host: AgentHost, systemd: FakeSystemd, tmp_path: Path
) -> None:
    token = plane.token(uses=1)
    assert install(host, systemd, plane.url, token).returncode == 0
    second = AgentHost(tmp_path / "second", keys_dir=host.keys_dir)
    again = install(second, systemd, plane.url, token, "--name", "web-02", "--force")
    assert again.returncode == 2
    assert one_line(again.stderr) == (
        "--enrollment-token: the enrollment token has no use left (all 1 were used): ask for a "
        "new one"
    )
    assert not (second.state_dir / "agent.toml").exists()
    assert len(plane.agents) == 1


@pytest.mark.parametrize(
    ("token_options", "name", "expected"),
    [
        pytest.param(None, "web-01", "--enrollment-token: the control plane does not know this "
                     "enrollment token, or it was revoked: ask whoever gave it to you for a new "
                     "one", id="unknown"),
        pytest.param({"revoked": True}, "web-01", "--enrollment-token: the control plane does not "
                     "know this enrollment token, or it was revoked", id="revoked"),
        pytest.param({"expired": True}, "web-01", "--enrollment-token: the enrollment token "
                     "expired at 2026-12-03T01:00:00Z: ask for a new one", id="expired"),
        pytest.param({"name_pattern": "db-*"}, "web-01", "--name: found 'web-01' — does not match "
                     "the token's name pattern 'db-*' (give a name that does with --name)",
                     id="name_not_allowed_one_line"),
    ],
)  # fmt: skip
def test_each_refusal_of_the_exchange_is_one_line_and_writes_nothing(
    plane: StandInPlane,
    host: AgentHost,
    systemd: FakeSystemd,
    token_options: dict[str, object] | None,
    name: str,
    expected: str,
) -> None:
    token = "nwe_never_issued_000000" if token_options is None else plane.token(**token_options)
    result = install(host, systemd, plane.url, token, "--name", name)
    assert result.returncode == 2
    assert one_line(result.stderr).startswith(expected)
    assert not (host.state_dir / "agent.toml").exists()
    # Not even the folder it made for the config: the host is as it was.
    assert not host.state_dir.exists()
    assert not list(systemd.unit_dir.iterdir())
    assert systemd.calls() == []


def test_a_refused_install_removes_the_folders_it_made_and_keeps_the_ones_that_were_there(
    plane: StandInPlane, host: AgentHost, systemd: FakeSystemd, tmp_path: Path
) -> None:
    # As on a host without the package's folders: the config in its own folder, the state in
    # another, a trust root held in the state; an /etc that was there before.
    etc = tmp_path / "etc"
    etc.mkdir()
    config = etc / "nachtwacht-agent" / "agent.toml"
    root = tmp_path / "root-1.json"
    root.write_bytes(RootChain().versions[1])
    result = install(
        host, systemd, plane.url, "nwe_never_issued_000000",
        "--config", str(config), "--trust-root", str(root),
    )  # fmt: skip
    assert result.returncode == 2
    assert one_line(result.stderr).startswith("--enrollment-token: the control plane does not")
    assert not config.parent.exists()
    assert not host.state_dir.exists()
    assert etc.is_dir()


def test_a_name_the_organisation_has_is_one_line(
    plane: StandInPlane, host: AgentHost, systemd: FakeSystemd, tmp_path: Path
) -> None:
    assert install(host, systemd, plane.url, plane.token()).returncode == 0
    other = AgentHost(tmp_path / "other", keys_dir=host.keys_dir)
    result = install(other, systemd, plane.url, plane.token(), "--force")
    assert result.returncode == 2
    assert one_line(result.stderr) == (
        "--name: the organisation already has an agent named 'web-01': choose another name"
    )


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        pytest.param(["--proxy", "ftp://proxy:21"], "--proxy: found 'ftp://proxy:21' — expected a "
                     "proxy URL", id="bad_proxy"),
        pytest.param(["--agent-user", "no-such-user-here"], "--agent-user: 'no-such-user-here' is "
                     "not a user on this host", id="unknown_agent_user"),
        pytest.param(["--name", "web\n01"], "--name: found 'web\\n01' — expected 1 to 200 "
                     "printable characters", id="bad_name"),
        pytest.param(["--trusted-key", "/nonexistent/release.pub"], "--trusted-key: "
                     "'/nonexistent/release.pub' cannot be read", id="missing_key"),
    ],
)  # fmt: skip
def test_a_bad_flag_is_refused_before_the_token_is_used(
    plane: StandInPlane, host: AgentHost, systemd: FakeSystemd, extra: list[str], expected: str
) -> None:
    token = plane.token(uses=1)
    result = install(host, systemd, plane.url, token, *extra)
    assert result.returncode == 2
    assert one_line(result.stderr).startswith(expected)
    assert ".agent.toml.enroll" not in result.stderr
    assert plane.exchanges() == []
    assert plane.tokens[token].used == 0


def test_a_unit_directory_that_is_not_one_is_refused_before_the_token_is_used(
    plane: StandInPlane, host: AgentHost, systemd: FakeSystemd, tmp_path: Path
) -> None:
    result = install(
        host, systemd, plane.url, plane.token(), "--systemd-dir", str(tmp_path / "missing")
    )
    assert result.returncode == 2
    assert one_line(result.stderr).startswith(
        f"--systemd-dir: {tmp_path / 'missing'} is not a directory"
    )
    assert plane.exchanges() == []


def test_an_agent_credential_given_as_the_token_is_refused_without_showing_it(
    plane: StandInPlane, host: AgentHost, systemd: FakeSystemd
) -> None:
    result = install(host, systemd, plane.url, "nwa_an_agents_own_secret_value")
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert line.startswith("--enrollment-token: expected an enrollment token starting with nwe_")
    assert "an_agents_own_secret_value" not in result.stderr
    assert plane.requests == []


def test_no_start_writes_the_config_and_touches_no_unit(
    plane: StandInPlane, host: AgentHost, systemd: FakeSystemd
) -> None:
    result = install(host, systemd, plane.url, plane.token(), "--no-start")
    assert result.returncode == 0, result.stderr
    assert (host.state_dir / "agent.toml").exists()
    assert list(systemd.unit_dir.iterdir()) == []
    assert systemd.calls() == []
    assert "systemctl daemon-reload && systemctl enable --now nachtwacht-agent.service" in (
        result.stdout
    )


def test_a_failed_start_keeps_the_credential_and_says_what_to_run(
    plane: StandInPlane, host: AgentHost, systemd: FakeSystemd
) -> None:
    systemd.fail_from_now()
    result = install(host, systemd, plane.url, plane.token())
    assert result.returncode == 1
    [credential] = plane.agents
    assert tomllib.loads((host.state_dir / "agent.toml").read_text())["credential"] == credential
    assert "the agent is enrolled and its config written, but it was not started: " in (
        result.stdout
    )
    assert "systemctl daemon-reload: exit status 1 (Failed: Access denied)" in result.stdout
    assert (
        "once that is fixed, start it with: systemctl daemon-reload && systemctl enable "
        "provibr-agent.service && systemctl enable --now nachtwacht-agent.service"
    ) in result.stdout


def test_a_unit_the_administrator_wrote_is_kept_and_not_enabled(
    plane: StandInPlane, host: AgentHost, systemd: FakeSystemd
) -> None:
    own = systemd.unit_dir / "provibr-agent.service"
    own.write_text("[Service]\nExecStart=/usr/local/bin/provibr-agent\n")
    result = install(host, systemd, plane.url, plane.token())
    assert result.returncode == 0, result.stderr
    assert own.read_text() == "[Service]\nExecStart=/usr/local/bin/provibr-agent\n"
    assert f"unit kept as it was (not written by install): {own}" in result.stdout
    assert systemd.calls() == ["daemon-reload", "enable --now nachtwacht-agent.service"]


def test_the_units_the_bundle_installed_are_enabled_as_they_are(
    plane: StandInPlane, host: AgentHost, systemd: FakeSystemd
) -> None:
    # The offline bundle's install.sh puts its units in the administrator's directory.
    units = {
        name: WRITTEN_BY_BUNDLE + shipped_unit(name)
        for name in ("nachtwacht-agent.service", "provibr-agent.service")
    }
    for name, text in units.items():
        (systemd.unit_dir / name).write_bytes(text)
    result = install(host, systemd, plane.url, plane.token())
    assert result.returncode == 0, result.stderr
    for name, text in units.items():
        assert (systemd.unit_dir / name).read_bytes() == text
        assert f"unit from the bundle's install.sh: {systemd.unit_dir / name}" in result.stdout
    assert "not written by install" not in result.stdout
    assert systemd.calls() == [
        "daemon-reload",
        "enable provibr-agent.service",
        "enable --now nachtwacht-agent.service",
    ]


def test_the_token_is_read_from_stdin_and_the_agent_user_is_kept(
    plane: StandInPlane, host: AgentHost, systemd: FakeSystemd
) -> None:
    token = plane.token()
    command = nachtwacht_command(
        "agent", "install", "--state-dir", str(host.state_dir), "--url", plane.url,
        "--enrollment-token", "-", "--name", "web-01", "--trusted-key", str(host.public_key),
        "--install-root", str(host.install_root), "--restart-command", "true", "--no-start",
        "--agent-user", "nobody",
    )  # fmt: skip
    result = subprocess.run(
        command,
        input=f"{token}\n",
        env=CHECKOUT.environment(systemd.env()),
        cwd=CHECKOUT.checkout,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert token not in result.stdout + result.stderr
    assert tomllib.loads((host.state_dir / "agent.toml").read_text())["agent_user"] == "nobody"
    assert os.access(host.state_dir / "agent.toml", os.R_OK)


def test_without_agent_user_the_managed_agents_unit_user_is_taken(
    plane: StandInPlane, host: AgentHost, systemd: FakeSystemd
) -> None:
    (systemd.unit_dir / "provibr-agent.service").write_text("[Service]\nUser=nobody\n")
    result = install(host, systemd, plane.url, plane.token())
    assert result.returncode == 0, result.stderr
    assert "agent user: nobody (the User= of provibr-agent.service" in result.stdout
    assert tomllib.loads((host.state_dir / "agent.toml").read_text())["agent_user"] == "nobody"


def test_a_unit_user_the_host_lacks_is_said_and_not_written(
    plane: StandInPlane, host: AgentHost, systemd: FakeSystemd
) -> None:
    (systemd.unit_dir / "provibr-agent.service").write_text("[Service]\nUser=no-such-user-x\n")
    result = install(host, systemd, plane.url, plane.token())
    assert result.returncode == 0, result.stderr
    assert "runs as 'no-such-user-x', which this host does not have yet" in result.stdout
    assert "agent_user" not in tomllib.loads((host.state_dir / "agent.toml").read_text())


def test_a_config_that_cannot_be_written_after_the_exchange_does_not_lose_the_credential(
    plane: StandInPlane, host: AgentHost, systemd: FakeSystemd
) -> None:
    # A folder where the config file should go: the staging copy beside it is written, the
    # config itself is not.
    (host.state_dir / "agent.toml").mkdir(parents=True)
    result = install(host, systemd, plane.url, plane.token(), "--force")
    assert result.returncode == 2
    [(credential, (agent_id, _))] = plane.agents.items()
    assert f"the agent web-01 ({agent_id}) exists on the control plane now" in result.stderr
    assert f"Its credential, shown this once — keep it secret: {credential}" in result.stderr
    assert "nachtwacht agent enroll --credential -" in result.stderr
    assert systemd.calls() == []


class _Foreign(BaseHTTPRequestHandler):
    """Whatever answers at the control plane's address when no control plane does."""

    answers: ClassVar[dict[str, tuple[int, str, bytes]]] = {
        "captive_portal": (
            200,
            "text/html",
            b"<html><body>Please sign in to the Wi-Fi</body></html>",
        ),
        "proxy_login": (401, "text/html", b"<html><body>Proxy sign-in required</body></html>"),
        "endless_answer": (201, "application/json", b'{"agent_id": "' + b"0" * 2_000_000 + b'"}'),
    }

    def do_POST(self) -> None:
        status, content_type, body = self.answers[self.server.answer]  # type: ignore[attr-defined]
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param("captive_portal", "with an HTML page", id="captive_portal"),
        pytest.param("proxy_login", "that is not the control plane", id="proxy_login_page"),
        pytest.param("endless_answer", "runs past 65536 bytes", id="endless_answer"),
    ],
)
def test_an_answer_from_no_control_plane_is_one_line_and_writes_nothing(
    host: AgentHost, systemd: FakeSystemd, answer: str, expected: str
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Foreign)
    server.answer = answer  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        result = install(host, systemd, url, "nwe_a_token_for_no_plane_00")
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode != 0
    line = one_line(result.stderr)
    assert expected in line
    assert "Wi-Fi" not in line and "sign-in" not in line and "<html" not in line
    assert "nwe_a_token_for_no_plane_00" not in result.stderr + result.stdout
    assert not (host.state_dir / "agent.toml").exists()
    assert systemd.calls() == []
