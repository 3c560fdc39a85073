"""An answer cut off mid-body (a proxy or a load balancer closing the connection, a server that
dies): the minute is offline, nothing is consumed, and the words say the connection broke off
with the answer half come — not that the agent could not connect, which sends an admin to look
at DNS and firewalls. Real loopback HTTP, directly and through an HTTP proxy."""

from __future__ import annotations

import pytest

from agent_daemon.connection.control_plane_client import ControlPlaneClient
from agent_daemon.connection.http_client import build_http_client
from agent_daemon.connection.network_settings import NetworkSettings
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.errors import ControlPlaneUnreachable
from ground.clock import SystemClock
from tests.agent_daemon.network_support.proxies import http_proxy
from tests.agent_daemon.scripted_server import raw, scripted_server

pytestmark = pytest.mark.slow

CUT = [
    pytest.param(
        b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"a',
        id="short_of_its_length",
    ),
    pytest.param(
        b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{"agent_id": 12',
        id="mid_chunk",
    ),
    pytest.param(b"", id="no_answer_at_all"),
]


def _client(origin: str, **network: object) -> ControlPlaneClient:
    http = build_http_client(
        base_url=origin,
        credential="nwa_test",
        timeout_seconds=2,
        network=NetworkSettings.model_validate(network),
        environ={},
    )
    return ControlPlaneClient(http=http, server_clock=ServerClock(SystemClock()))


@pytest.mark.parametrize("answer", CUT)
def test_an_answer_cut_off_is_offline_in_words_that_say_so(answer: bytes) -> None:
    with scripted_server(raw(answer)) as server, pytest.raises(ControlPlaneUnreachable) as raised:
        _client(server.origin).fetch_config(etag=None)
    message = str(raised.value)
    assert message.startswith("GET /v1/agent/config: the connection broke off before the whole")
    assert "cannot connect" not in message


@pytest.mark.parametrize("answer", CUT)
def test_a_report_whose_answer_a_proxy_cuts_off_stays_queued(answer: bytes) -> None:
    with scripted_server(raw(answer)) as server:
        port = int(server.listener.getsockname()[1])
        with http_proxy({"control.example": port}) as proxy:
            client = _client(f"http://control.example:{port}", proxy=proxy.url, insecure_http=True)
            with pytest.raises(ControlPlaneUnreachable, match="the connection broke off"):
                client.deliver("PATCH", "/v1/agent/runs/r", {"status": "succeeded"})
            assert proxy.destinations == [f"control.example:{port}"]


def test_a_port_nothing_listens_on_still_cannot_connect() -> None:
    with scripted_server() as server:
        origin = server.origin
    with pytest.raises(ControlPlaneUnreachable, match=r"^GET /v1/agent/config: cannot connect"):
        _client(origin).fetch_config(etag=None)
