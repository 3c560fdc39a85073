"""The one outbound request of webhooks and OpenID Connect providers: to the checked address, with
the URL's own Host header, never following a redirect. Real HTTP servers on loopback."""

from __future__ import annotations

import http.server
import ipaddress
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from control_plane.notifications.addresses import (
    IPAddress,
    WebhookAddressPolicy,
    WebhookAddressRefused,
    pinned_send,
)


@contextmanager
def _server(family: socket.AddressFamily, host: str) -> Iterator[tuple[int, list[str]]]:
    hosts: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hosts.append(str(self.headers["Host"]))
            self.send_response(302)
            self.send_header("Location", "/elsewhere")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    class Server(http.server.ThreadingHTTPServer):
        address_family = family

    server = Server((host, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], hosts
    finally:
        server.shutdown()
        server.server_close()


def test_an_ipv6_literal_keeps_its_brackets_in_the_host_header() -> None:
    with _server(socket.AF_INET6, "::1") as (port, hosts), httpx.Client() as client:
        answer = pinned_send(
            client,
            WebhookAddressPolicy.allowing(["::1/128"]),
            lambda host, port: [],
            "GET",
            f"http://[::1]:{port}/x",
        )
    assert answer.status_code == 302  # the redirect is the answer, not followed
    assert hosts == [f"[::1]:{port}"]


def test_a_name_goes_to_the_address_checked_with_its_own_host_header() -> None:
    resolved: list[str] = []

    def resolve(host: str, port: int) -> list[IPAddress]:
        resolved.append(host)
        return [ipaddress.ip_address("127.0.0.1")]

    with _server(socket.AF_INET, "127.0.0.1") as (port, hosts), httpx.Client() as client:
        allowed = WebhookAddressPolicy.allowing(["127.0.0.0/8"])
        pinned_send(client, allowed, resolve, "GET", f"http://idp.example:{port}/x")
        with pytest.raises(WebhookAddressRefused, match="loopback"):
            pinned_send(
                client, WebhookAddressPolicy(), resolve, "GET", f"http://idp.example:{port}/x"
            )
    assert resolved == ["idp.example", "idp.example"]
    assert hosts == [f"idp.example:{port}"]  # one request: the refused one never connected
