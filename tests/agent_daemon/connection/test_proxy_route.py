"""Proxies: `proxy` / `no_proxy` in agent.toml, the environment's HTTPS_PROXY and
friends, HTTP CONNECT and SOCKS5 — through real proxies on loopback to a real TLS control plane,
and the artifact download over the same route."""

from __future__ import annotations

import hashlib
import ssl
import sys
from pathlib import Path

import httpx
import pytest

from agent_daemon.connection.http_client import build_http_client, network_facts
from agent_daemon.connection.network_settings import NetworkSettings
from agent_daemon.connection.proxy_route import resolve_route
from agent_daemon.errors import ConfigError, DownloadStalled
from agent_daemon.updater.download.fetch import ArtifactSpec, DownloadLimits, download_artifact
from ground.contract import CONFIG_PATH
from tests.agent_daemon.network_support.pki import Pki, make_pki
from tests.agent_daemon.network_support.proxies import http_proxy, socks5_proxy
from tests.agent_daemon.network_support.servers import ARTIFACT_PATH, control_plane
from tests.agent_daemon.scripted_server import head_never_ends, scripted_server

CREDENTIAL = "nwa_the_agents_credential"
DEAD_PROXY = "http://127.0.0.1:9"  # nothing listens on the discard port


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


def client(url: str, environ: dict[str, str] | None = None, **network: object) -> httpx.Client:
    return build_http_client(
        base_url=url,
        credential=CREDENTIAL,
        timeout_seconds=10,
        network=NetworkSettings.model_validate(network),
        environ=environ or {},
    )


def fetch(url: str, environ: dict[str, str] | None = None, **network: object) -> httpx.Response:
    with client(url, environ, **network) as http:
        return http.get(CONFIG_PATH)


# -- through the proxy ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "start",
    [
        pytest.param(http_proxy, id="http_connect"),
        pytest.param(socks5_proxy, id="socks5"),
        pytest.param(lambda hosts: socks5_proxy(hosts, scheme="socks5h"), id="socks5h"),
    ],
)
def test_the_control_plane_is_reached_through_the_proxy_with_tls_and_pin(
    pki: Pki, start: object
) -> None:
    with control_plane(pki) as plane, start({"control.example": plane.port}) as proxy:  # type: ignore[operator]
        url = plane.url_for("control.example")
        answer = fetch(
            url, proxy=proxy.url, ca_file=pki.ca, pinned_public_key_sha256=pki.server_pin
        )
        assert answer.status_code == 200
        # The proxy was asked for the name (it resolves it), and carried the whole exchange.
        assert proxy.destinations == [f"control.example:{plane.port}"]
        (request,) = plane.requests
        assert request["headers"]["Authorization"] == f"Bearer {CREDENTIAL}"


def server_context(pki: Pki) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    return context


def test_an_https_proxy_is_trusted_like_the_control_plane(pki: Pki) -> None:
    """TLS to the proxy, and TLS to the control plane inside it; the pin on the inner one."""
    with (
        control_plane(pki) as plane,
        http_proxy({"control.example": plane.port}, tls=server_context(pki)) as proxy,
    ):
        url = plane.url_for("control.example")
        answer = fetch(
            url, proxy=proxy.url, ca_file=pki.ca, pinned_public_key_sha256=pki.server_pin
        )
        assert answer.status_code == 200
        assert proxy.destinations == [f"control.example:{plane.port}"]


def test_an_untrusted_https_proxy_is_named_not_the_control_plane(pki: Pki) -> None:
    with (
        control_plane(pki) as plane,
        http_proxy({"control.example": plane.port}, tls=server_context(pki)) as proxy,
        pytest.raises(httpx.ConnectError) as caught,
    ):
        fetch(plane.url_for("control.example"), proxy=proxy.url)
    assert str(caught.value).startswith("the certificate of localhost is not trusted (")
    assert proxy.destinations == []


def test_a_wrong_pin_is_refused_through_the_proxy_too(pki: Pki) -> None:
    with control_plane(pki) as plane, http_proxy({"control.example": plane.port}) as proxy:
        with pytest.raises(httpx.ConnectError, match="does not match pinned_public_key_sha256"):
            fetch(
                plane.url_for("control.example"),
                proxy=proxy.url,
                ca_file=pki.ca,
                pinned_public_key_sha256="00" * 32,
            )
        assert proxy.destinations == [f"control.example:{plane.port}"]
        assert plane.requests == []


def test_plain_http_is_forwarded_by_an_http_proxy() -> None:
    with control_plane(None) as plane, http_proxy({"control.example": plane.port}) as proxy:
        answer = fetch(plane.url_for("control.example"), proxy=proxy.url, insecure_http=True)
        assert answer.status_code == 200
        assert proxy.destinations == [f"control.example:{plane.port}"]


def test_the_artifact_download_takes_the_same_proxy_and_trust(pki: Pki, tmp_path: Path) -> None:
    artifact = b"signed build bytes " * 1000
    with (
        control_plane(pki, artifact=artifact) as plane,
        socks5_proxy({"control.example": plane.port}) as proxy,
        client(
            plane.url_for("control.example"),
            proxy=proxy.url,
            ca_file=pki.ca,
            pinned_public_key_sha256=pki.server_pin,
        ) as http,
    ):
        spec = ArtifactSpec(
            url=f"{plane.url_for('control.example')}{ARTIFACT_PATH}",
            sha256=hashlib.sha256(artifact).hexdigest(),
            length=len(artifact),
            unpacked_size=len(artifact),
        )
        path = download_artifact(
            http,
            spec,
            staging=tmp_path / "staging",
            install_root=tmp_path,
            limits=DownloadLimits(read_timeout=10, deadline=30, disk_reserve_bytes=0),
        )
        assert path.read_bytes() == artifact
        assert proxy.destinations == [f"control.example:{plane.port}"]
        (request,) = plane.requests
        assert request["path"] == ARTIFACT_PATH


def test_the_artifact_download_refuses_a_wrong_pin(pki: Pki, tmp_path: Path) -> None:
    from agent_daemon.errors import DownloadFailed

    artifact = b"x" * 100
    with (
        control_plane(pki, artifact=artifact) as plane,
        client(plane.url, ca_file=pki.ca, pinned_public_key_sha256="11" * 32) as http,
    ):
        spec = ArtifactSpec(
            url=f"{plane.url}{ARTIFACT_PATH}",
            sha256=hashlib.sha256(artifact).hexdigest(),
            length=len(artifact),
            unpacked_size=len(artifact),
        )
        with pytest.raises(DownloadFailed, match="does not match pinned_public_key_sha256"):
            download_artifact(
                http,
                spec,
                staging=tmp_path / "staging",
                install_root=tmp_path,
                limits=DownloadLimits(read_timeout=10, deadline=30, disk_reserve_bytes=0),
            )
        assert plane.requests == []


def test_the_download_deadline_holds_through_a_socks_proxy(tmp_path: Path) -> None:
    """The deadline's watchdog shuts the socket it saw connect; through SOCKS that connect is
    traced under another name, and a server trickling its head was never cut off."""
    limits = DownloadLimits(read_timeout=5.0, deadline=1.0, disk_reserve_bytes=0)
    with (
        scripted_server(head_never_ends(interval=0.05)) as hostile,
        socks5_proxy({"mirror.example": int(httpx.URL(hostile.url()).port or 0)}) as proxy,
        client("http://mirror.example", proxy=proxy.url, insecure_http=True) as http,
    ):
        spec = ArtifactSpec(
            url="http://mirror.example/artifact", sha256="0" * 64, length=10, unpacked_size=1
        )
        with pytest.raises(DownloadStalled, match=r"ran past its deadline of 1 s"):
            download_artifact(
                http, spec, staging=tmp_path / "staging", install_root=tmp_path, limits=limits
            )
        assert proxy.destinations == ["mirror.example:80"]


# -- which proxy: agent.toml, the environment, no_proxy --------------------------------------------


def test_the_environments_https_proxy_is_honoured(pki: Pki) -> None:
    with control_plane(pki) as plane, http_proxy({"control.example": plane.port}) as proxy:
        answer = fetch(plane.url_for("control.example"), {"HTTPS_PROXY": proxy.url}, ca_file=pki.ca)
        assert answer.status_code == 200
        assert proxy.destinations == [f"control.example:{plane.port}"]


def test_agent_toml_wins_over_the_environment(pki: Pki) -> None:
    with control_plane(pki) as plane, http_proxy({"control.example": plane.port}) as proxy:
        environ = {"HTTPS_PROXY": DEAD_PROXY, "ALL_PROXY": DEAD_PROXY}
        answer = fetch(plane.url_for("control.example"), environ, proxy=proxy.url, ca_file=pki.ca)
        assert answer.status_code == 200
        assert proxy.destinations == [f"control.example:{plane.port}"]


@pytest.mark.parametrize(
    ("host", "environ", "network"),
    [
        pytest.param("localhost", {}, {"no_proxy": ["localhost"]}, id="agent_toml_name"),
        pytest.param("127.0.0.1", {}, {"no_proxy": ["127.0.0.0/8"]}, id="agent_toml_cidr"),
        pytest.param("127.0.0.1", {"NO_PROXY": "example.org, 127.0.0.1"}, {},
                     id="environment_address"),
        pytest.param("localhost", {"no_proxy": "*"}, {}, id="environment_star"),
    ],
)  # fmt: skip
def test_no_proxy_sends_the_control_plane_direct(
    host: str, environ: dict[str, str], network: dict[str, object]
) -> None:
    with control_plane(None) as plane:
        answer = fetch(plane.url_for(host), {"HTTP_PROXY": DEAD_PROXY, **environ}, **network)
        assert answer.status_code == 200


def test_without_a_matching_no_proxy_entry_the_proxy_is_used() -> None:
    """The guard above, the other way round: a name that is not covered goes to the proxy."""
    with control_plane(None) as plane, pytest.raises(httpx.ConnectError, match="through the proxy"):
        fetch(plane.url_for("localhost"), {"HTTP_PROXY": DEAD_PROXY, "NO_PROXY": "notlocalhost"})


def test_no_proxy_in_agent_toml_wins_over_the_environments() -> None:
    with control_plane(None) as plane, pytest.raises(httpx.ConnectError, match="through the proxy"):
        fetch(
            plane.url_for("localhost"),
            {"HTTP_PROXY": DEAD_PROXY, "NO_PROXY": "*"},
            no_proxy=["example.org"],
        )


def test_an_unreachable_proxy_is_named_in_the_error() -> None:
    with control_plane(None) as plane, pytest.raises(httpx.ConnectError) as caught:
        fetch(plane.url, proxy=DEAD_PROXY)
    assert str(caught.value).endswith(f"(through the proxy {DEAD_PROXY}, from agent.toml proxy)")
    assert plane.requests == []


def test_status_and_the_start_log_say_which_proxy_and_why() -> None:
    route = network_facts(
        "https://control.example", NetworkSettings(), {"https_proxy": "http://u:secret@p.corp:3128"}
    )["route"]
    assert route == "via http://u:***@p.corp:3128 (environment https_proxy)"
    direct = network_facts(
        "https://control.example",
        NetworkSettings(proxy="socks5h://p.corp:1080", no_proxy=(".example",)),
        {},
    )["route"]
    assert direct == "direct (control.example matches agent.toml no_proxy entry '.example')"
    assert network_facts("https://c.example", NetworkSettings(), {})["route"] == (
        "direct (no proxy configured)"
    )


# -- proxies that cannot be used: one line naming the field ----------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("ftp://proxy:21", id="unknown_scheme"),
        pytest.param("http://", id="no_host"),
        pytest.param("http://proxy:99999", id="bad_port"),
        pytest.param("http://proxy:3128/path", id="a_path"),
    ],
)
def test_a_bad_proxy_in_agent_toml_is_refused_naming_the_field(value: str) -> None:
    with pytest.raises(ValueError, match="proxy") as caught:
        NetworkSettings(proxy=value)
    assert "expected" in str(caught.value)


def test_a_bad_proxy_in_the_environment_names_the_variable() -> None:
    with pytest.raises(ConfigError, match=r"^environment HTTPS_PROXY: 'ftp://x:1': expected"):
        resolve_route(NetworkSettings(), {"HTTPS_PROXY": "ftp://x:1"})


def test_a_bad_no_proxy_entry_names_the_variable() -> None:
    with pytest.raises(ConfigError, match=r"^environment NO_PROXY: 'bad host!'"):
        resolve_route(NetworkSettings(), {"NO_PROXY": "ok.example,bad host!"})


def test_a_socks_proxy_without_socks_support_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As on a host where httpx was installed without its `socks` extra.
    monkeypatch.setitem(sys.modules, "socksio", None)
    with pytest.raises(ConfigError) as caught:
        client("https://control.example", proxy="socks5://127.0.0.1:1080")
    assert str(caught.value) == (
        "agent.toml proxy: 'socks5://127.0.0.1:1080' is a SOCKS proxy, but SOCKS support is not "
        "installed: pip install 'httpx[socks]' (the agent's package has it)"
    )
    with pytest.raises(ConfigError, match=r"^environment ALL_PROXY: 'socks5h://p:1'"):
        client("https://control.example", {"ALL_PROXY": "socks5h://p:1"})


def test_a_proxy_password_never_reaches_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "socksio", None)
    with pytest.raises(ConfigError) as caught:
        client("https://c.example", proxy="socks5://me:hunter2@127.0.0.1:1080")
    assert "hunter2" not in str(caught.value)
    assert "me:***@127.0.0.1:1080" in str(caught.value)
