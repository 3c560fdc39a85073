"""The network settings' rules as tables: which control URLs may be plain http, which proxy a
request takes, which `no_proxy` entries are understood, and the forms a pin may be written in."""

from __future__ import annotations

import base64
import hashlib

import pytest

from agent_daemon.connection.network_settings import (
    NetworkSettings,
    check_control_url_transport,
    check_no_proxy_entry,
    parse_pin,
)
from agent_daemon.connection.proxy_route import resolve_route, shown_proxy
from agent_daemon.errors import ConfigError

DIGEST = hashlib.sha256(b"a public key").digest()


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("http://127.0.0.1:8080", id="ipv4_loopback"),
        pytest.param("http://127.1.2.3", id="all_of_127_8"),
        pytest.param("http://[::1]:8080", id="ipv6_loopback"),
        pytest.param("http://localhost:8080", id="localhost"),
        pytest.param("https://control.example", id="https"),
    ],
)
def test_plain_http_is_allowed_only_where_the_credential_stays_on_the_host(url: str) -> None:
    check_control_url_transport(url, insecure_http=False)


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("http://control.example", id="remote_name"),
        pytest.param("http://10.0.0.1", id="private_address"),
        pytest.param("http://127.0.0.1.attacker.example", id="loopback_lookalike_name"),
        pytest.param("http://localhost.attacker.example", id="localhost_lookalike_name"),
        pytest.param("http://0.0.0.0:8080", id="any_address"),
    ],
)
def test_plain_http_to_anything_else_is_refused_unless_allowed(url: str) -> None:
    with pytest.raises(ConfigError, match="--insecure-http"):
        check_control_url_transport(url, insecure_http=False)
    check_control_url_transport(url, insecure_http=True)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(base64.b64encode(DIGEST).decode(), id="base64"),
        pytest.param("sha256//" + base64.b64encode(DIGEST).decode(), id="curl_form"),
        pytest.param(DIGEST.hex(), id="hex"),
        pytest.param(DIGEST.hex().upper(), id="hex_upper"),
        pytest.param(":".join(f"{b:02X}" for b in DIGEST), id="hex_with_colons"),
    ],
)
def test_a_pin_may_be_written_in_base64_or_hex(text: str) -> None:
    assert parse_pin(text) == DIGEST


@pytest.mark.parametrize(
    "entry",
    ["*", "example.com", ".example.com", "*.example.com", "localhost", "10.0.0.0/8", "192.0.2.7",
     "::1", "[::1]", "fd00::/8"],
)  # fmt: skip
def test_no_proxy_entries_that_are_understood(entry: str) -> None:
    assert check_no_proxy_entry(entry) == entry


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param("bad host", id="space"),
        pytest.param("example.com:8080", id="with_port"),
        pytest.param("http://example.com", id="url"),
        pytest.param("", id="empty"),
    ],
)
def test_no_proxy_entries_that_are_refused(entry: str) -> None:
    with pytest.raises(ValueError, match="expected a host name"):
        check_no_proxy_entry(entry)


def test_lower_case_variables_come_first_and_all_proxy_is_the_fallback() -> None:
    route = resolve_route(
        NetworkSettings(),
        {"https_proxy": "http://lower:1", "HTTPS_PROXY": "http://upper:1", "ALL_PROXY": "p:3128"},
    )
    assert route.https is not None and route.https.url == "http://lower:1"
    assert route.https.source == "environment https_proxy"
    # A proxy without a scheme is an http proxy, as every tool reads these variables.
    assert route.http is not None and route.http.url == "http://p:3128"
    assert route.http.source == "environment ALL_PROXY"


def test_agent_toml_proxy_replaces_every_variable() -> None:
    route = resolve_route(
        NetworkSettings(proxy="socks5h://p:1080"),
        {"HTTPS_PROXY": "http://x:1", "HTTP_PROXY": "http://x:1"},
    )
    assert route.https == route.http
    assert route.https is not None and route.https.source == "agent.toml proxy"


@pytest.mark.parametrize(
    ("entries", "host", "bypassed"),
    [
        pytest.param(("example.com",), "example.com", True, id="the_name"),
        pytest.param(("example.com",), "a.b.example.com", True, id="a_subdomain"),
        pytest.param(("example.com",), "notexample.com", False, id="a_longer_name"),
        pytest.param((".example.com",), "example.com", True, id="leading_dot"),
        pytest.param(("10.0.0.0/8",), "10.1.2.3", True, id="in_network"),
        pytest.param(("10.0.0.0/8",), "11.0.0.1", False, id="outside_network"),
        pytest.param(("10.0.0.0/8",), "ten.example", False, id="names_are_not_resolved"),
        pytest.param(("::1",), "[::1]", True, id="ipv6"),
        pytest.param(("*",), "anything.example", True, id="star"),
    ],
)
def test_which_hosts_bypass_the_proxy(entries: tuple[str, ...], host: str, bypassed: bool) -> None:
    route = resolve_route(NetworkSettings(proxy="http://p:3128", no_proxy=entries), {})
    assert (route.proxy_for("https", host) is None) is bypassed


def test_a_proxy_password_is_never_shown() -> None:
    assert shown_proxy("http://me:s3cret@p.corp:3128") == "http://me:***@p.corp:3128"
    assert "s3cret" not in repr(NetworkSettings(proxy="http://me:s3cret@p.corp:3128"))
