"""Answers that do not come from a nachtwacht control plane, as the agent's one client meets them
over loopback — a corporate proxy that wants credentials, a web server at the wrong URL, a plain
http port reached with https. Each is one line saying what answered and what to check: never a
web page, never OpenSSL's words, and never "the control plane refused the agent's credential"
when the control plane was not asked."""

from __future__ import annotations

import httpx
import pytest

from agent_daemon.connection.control_plane_client import ControlPlaneClient
from agent_daemon.connection.http_client import build_http_client
from agent_daemon.connection.network_settings import NetworkSettings
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.errors import (
    BadServerAnswer,
    ControlPlaneError,
    ControlPlaneUnreachable,
    CredentialRefused,
)
from ground.clock import SystemClock
from ground.contract import ClaimRequest
from tests.agent_daemon.network_support.proxies import http_proxy
from tests.agent_daemon.network_support.servers import control_plane, web_server

pytestmark = pytest.mark.slow

CREDENTIAL = "nwa_the_agents_credential"
PAGE = b"<!DOCTYPE html>\n<html>\n<head><title>Welcome</title></head>\n<body>It works!</body>\n"


def client(
    url: str,
    *,
    proxy: str | None = None,
    transport: httpx.BaseTransport | None = None,
) -> ControlPlaneClient:
    http = build_http_client(
        base_url=url,
        credential=CREDENTIAL,
        timeout_seconds=10,
        network=NetworkSettings(proxy=proxy),
        environ={},
        transport=transport,
    )
    return ControlPlaneClient(http=http, server_clock=ServerClock(SystemClock()))


def one_line(exc: pytest.ExceptionInfo[ControlPlaneError]) -> str:
    text = str(exc.value)
    assert "\n" not in text, text
    assert "<" not in text, text  # no markup of a page
    return text


# The control plane behind the proxy is never reached: the proxy refuses first. An http:// URL is
# forwarded by the proxy, an https:// one asked for as a CONNECT tunnel.
VIA = [
    pytest.param("http://control.example:8080", id="forwarded_http"),
    pytest.param("https://control.example:8443", id="connect_tunnel"),
]


@pytest.mark.parametrize("url", VIA)
def test_a_proxy_that_wants_credentials_is_named_in_one_line(url: str) -> None:
    with (
        http_proxy(credentials=("alice", "s3cret")) as proxy,
        pytest.raises(ControlPlaneUnreachable) as caught,
    ):
        client(url, proxy=proxy.url).fetch_config(etag=None)
    assert one_line(caught) == (
        f"GET /v1/agent/config: cannot connect (the proxy {proxy.url} (agent.toml proxy) refused "
        "the proxy credentials (407 Proxy Authentication Required): give a user and password in "
        "its URL (http://user:password@host:port))"
    )


@pytest.mark.parametrize("url", VIA)
def test_wrong_proxy_credentials_say_to_check_them_without_showing_the_password(url: str) -> None:
    with http_proxy(credentials=("alice", "s3cret")) as proxy:
        wrong = proxy.url.replace("http://", "http://alice:wrong@")
        with pytest.raises(ControlPlaneUnreachable) as caught:
            client(url, proxy=wrong).fetch_config(etag=None)
    text = one_line(caught)
    assert "refused the proxy credentials (407 Proxy Authentication Required): check the user" in (
        text
    )
    assert "wrong" not in text
    assert "alice:***@" in text


def test_the_right_proxy_credentials_pass() -> None:
    with control_plane(None) as plane, http_proxy(credentials=("alice", "s3cret")) as proxy:
        right = proxy.url.replace("http://", "http://alice:s3cret@")
        fresh = client(plane.url, proxy=right).fetch_config(etag=None)
    assert fresh.config.name == "web-01"


def test_a_proxys_401_to_a_forwarded_request_is_not_the_agents_credential_refused() -> None:
    with (
        http_proxy(credentials=("alice", "s3cret"), refusal=401) as proxy,
        pytest.raises(ControlPlaneError) as caught,
    ):
        client("http://control.example:8080", proxy=proxy.url).fetch_config(etag=None)
    assert not isinstance(caught.value, CredentialRefused)
    assert isinstance(caught.value, ControlPlaneUnreachable)
    text = one_line(caught)
    assert "401 Unauthorized" in text
    assert "the control plane refused" not in text
    assert "not the control plane" in text


def test_a_proxys_own_403_page_to_a_forwarded_request_is_named_with_its_words_and_the_proxy() -> (
    None
):
    """A proxy's filter (tinyproxy's `403 Filtered` page): the proxy's own status phrase, the
    proxy that carried the request, what to check — not a refused credential."""
    with (
        web_server(403, PAGE, reason="Filtered") as page,
        http_proxy({"control.example": page.port}) as proxy,
        pytest.raises(ControlPlaneUnreachable) as caught,
    ):
        client("http://control.example:8080", proxy=proxy.url).fetch_config(etag=None)
    assert one_line(caught) == (
        f"GET /v1/agent/config: 403 Filtered (an HTML page) through the proxy {proxy.url} "
        "(agent.toml proxy), not the control plane's answer: the proxy, or a server between it "
        "and http://control.example:8080, refuses the request (check the proxy's rules for the "
        "control plane's host); the agent's own credential was not judged"
    )


def test_a_proxys_502_page_names_its_words_and_the_proxy() -> None:
    with (
        web_server(502, PAGE, reason="Unable to connect to upstream proxy") as page,
        http_proxy({"control.example": page.port}) as proxy,
        pytest.raises(ControlPlaneUnreachable) as caught,
    ):
        client("http://control.example:8080", proxy=proxy.url).fetch_config(etag=None)
    assert caught.value.status is None  # not the platform's outage: something on the way
    assert one_line(caught) == (
        "GET /v1/agent/config: 502 Unable to connect to upstream proxy (an HTML page) through the "
        f"proxy {proxy.url} (agent.toml proxy), not the control plane's answer (from the proxy, "
        "or a server between it and http://control.example:8080)"
    )


def test_a_502_page_without_a_proxy_names_the_server_and_keeps_a_standard_phrase() -> None:
    with web_server(502, PAGE) as server, pytest.raises(ControlPlaneUnreachable) as caught:
        client(server.url).fetch_config(etag=None)
    assert one_line(caught) == (
        f"GET /v1/agent/config: the server at {server.url} answered 502 Bad Gateway (an HTML page)"
    )


def test_a_proxys_401_to_a_tunnel_is_the_proxys_refusal() -> None:
    with (
        http_proxy(credentials=("alice", "s3cret"), refusal=401) as proxy,
        pytest.raises(ControlPlaneUnreachable) as caught,
    ):
        client("https://control.example:8443", proxy=proxy.url).fetch_config(etag=None)
    assert one_line(caught).endswith(
        f"(the proxy {proxy.url} (agent.toml proxy) refused the tunnel to control.example:8443 "
        "(401 Unauthorized); the control plane was not reached)"
    )


def test_the_control_planes_own_401_is_still_the_credential_refused() -> None:
    def refusing(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"detail": "unknown or revoked credential"})

    with pytest.raises(CredentialRefused, match="re-enroll the agent"):
        client("https://control.example", transport=httpx.MockTransport(refusing)).fetch_config(
            etag=None
        )


def test_a_login_page_in_front_of_the_control_plane_is_not_the_credential_refused() -> None:
    def login_page(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, content=PAGE, headers={"Content-Type": "text/html"})

    with pytest.raises(ControlPlaneUnreachable) as caught:
        client("https://control.example", transport=httpx.MockTransport(login_page)).fetch_config(
            etag=None
        )
    assert one_line(caught) == (
        "GET /v1/agent/config: 401 Unauthorized (an HTML page) from something at "
        "https://control.example that is not the control plane (a proxy, or a server in front of "
        "it, wants credentials): the agent's own credential was not judged"
    )


@pytest.mark.parametrize(
    ("status", "words"),
    [
        pytest.param(200, "200 OK", id="welcome_page"),
        pytest.param(404, "404 Not Found", id="not_found_page"),
    ],
)
def test_a_web_server_that_is_no_control_plane_is_one_line_with_the_status(
    status: int, words: str
) -> None:
    # The control plane was not reached (a captive portal's page is the same answer): unreachable,
    # as a report's delivery counts it, never a config the agent cannot use.
    with web_server(status, PAGE) as server, pytest.raises(ControlPlaneUnreachable) as caught:
        client(server.url).fetch_config(etag=None)
    assert one_line(caught) == (
        f"GET /v1/agent/config: the server at {server.url} answered {words} with an HTML page: it "
        "is not a nachtwacht control plane (is the URL the control plane's, and is a proxy or a "
        "login page in the way?)"
    )


def test_a_bare_404_names_the_status_and_asks_about_the_url() -> None:
    with web_server(404, b"") as server, pytest.raises(ControlPlaneUnreachable) as caught:
        client(server.url).fetch_config(etag=None)
    assert one_line(caught) == (
        f"GET /v1/agent/config: found 404 Not Found at {server.url}: is the URL the control "
        "plane's?"
    )


CLAIM = ClaimRequest(slot_key="2026-11-30T03:00", from_version="1.4.1")


@pytest.mark.parametrize(
    ("status", "body", "words"),
    [
        pytest.param(
            200,
            PAGE,
            "the server at {url} answered 200 OK with an HTML page: it is not a nachtwacht "
            "control plane (is the URL the control plane's, and is a proxy or a login page in "
            "the way?)",
            id="login_page",
        ),
        pytest.param(
            302,
            b"",
            "expected 201/200 or a refusal with a code, found 302 Found, which no control plane "
            "answers; the agent follows no redirect (its credential goes only to the control "
            "URL): is the control URL the control plane's own, with https, or is a login page in "
            "the way?",
            id="redirect",
        ),
        pytest.param(
            404, b"", "found 404 Not Found at {url}: is the URL the control plane's?", id="bare_404"
        ),
    ],
)
def test_a_claim_answered_by_something_in_the_way_is_the_control_plane_unreachable(
    status: int, body: bytes, words: str
) -> None:
    """A captive portal's page or its redirect in answer to the claim: the control plane was not
    reached (the slot is noted as unreachable), never a bad answer that ends the minute."""
    with web_server(status, body) as server, pytest.raises(ControlPlaneUnreachable) as caught:
        client(server.url).claim(CLAIM)
    assert one_line(caught) == "POST /v1/agent/claims: " + words.format(url=server.url)
    assert server.paths == ["/v1/agent/claims"]


def test_a_claim_answered_with_no_grant_in_the_control_planes_json_is_still_a_bad_answer() -> None:
    with (
        web_server(200, b'{"granted": "yes"}', content_type="application/json") as server,
        pytest.raises(BadServerAnswer),
    ):
        client(server.url).claim(CLAIM)


def test_https_to_a_plain_http_port_says_the_port_does_not_speak_tls() -> None:
    with control_plane(None) as plane, pytest.raises(ControlPlaneUnreachable) as caught:
        client(f"https://localhost:{plane.port}").fetch_config(etag=None)
    text = one_line(caught)
    assert text == (
        f"GET /v1/agent/config: cannot connect (the server at localhost:{plane.port} does not "
        f"speak TLS on that port; is the URL http://localhost:{plane.port}…?)"
    )
    assert "WRONG_VERSION_NUMBER" not in text


def test_https_through_a_proxy_to_a_plain_http_port_says_the_same() -> None:
    with (
        control_plane(None) as plane,
        http_proxy({"control.example": plane.port}) as proxy,
        pytest.raises(ControlPlaneUnreachable) as caught,
    ):
        client(f"https://control.example:{plane.port}", proxy=proxy.url).fetch_config(etag=None)
    assert f"the server at control.example:{plane.port} does not speak TLS on that port" in (
        one_line(caught)
    )
