"""Every request to the control plane ends within its stated total time — connect, response head
and body within `ANSWER_TIMEOUTS` request timeouts — however its bytes come: a status line and
headers sent one byte at a time (a broken proxy, a hostile middlebox) reset httpx's read timeout
with every byte, and held the minute for as long as the drip went on. Direct, on a connection an
earlier answer left open, and through an HTTP proxy (forwarded and tunnelled) or a SOCKS one.
Real loopback HTTP and TLS."""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from agent_daemon.connection.control_plane_client import ANSWER_TIMEOUTS, ControlPlaneClient
from agent_daemon.connection.http_client import build_http_client
from agent_daemon.connection.network_settings import NetworkSettings
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.errors import ControlPlaneUnreachable
from ground.clock import SystemClock
from ground.contract import ClaimRequest
from tests.agent_daemon.network_support.pki import make_pki
from tests.agent_daemon.network_support.proxies import Proxy, http_proxy, socks5_proxy
from tests.agent_daemon.network_support.servers import config_document
from tests.agent_daemon.scripted_server import (
    ScriptedServer,
    answers_then,
    head_drips,
    scripted_server,
)

pytestmark = pytest.mark.slow

TIMEOUT_SECONDS = 0.5
TOTAL_SECONDS = ANSWER_TIMEOUTS * TIMEOUT_SECONDS
# What a loaded 2-core machine may add to the bound before the error is seen.
SLACK_SECONDS = 2.0

ASKS: list[tuple[str, Callable[[ControlPlaneClient], object]]] = [
    ("config", lambda client: client.fetch_config(etag=None)),
    ("claim", lambda client: client.claim(ClaimRequest(slot_key="2026-11-30T03:00"))),
    ("confirm", lambda client: client.confirm_swap("0d7a0000-0000-4000-8000-0000000000ff")),
    ("report", lambda client: client.deliver("PATCH", "/v1/agent/runs/r", {"status": "x"})),
]


def _client(origin: str, **network: object) -> ControlPlaneClient:
    http = build_http_client(
        base_url=origin,
        credential="nwa_test",
        timeout_seconds=TIMEOUT_SECONDS,
        network=NetworkSettings.model_validate(network),
        environ={},
    )
    return ControlPlaneClient(http=http, server_clock=ServerClock(SystemClock()))


def _refused_in_time(
    ask: Callable[[ControlPlaneClient], object], client: ControlPlaneClient
) -> None:
    started = time.monotonic()
    with pytest.raises(ControlPlaneUnreachable) as raised:
        ask(client)
    took = time.monotonic() - started
    assert took < TOTAL_SECONDS + SLACK_SECONDS, f"took {took:.1f} s"
    message = str(raised.value)
    assert "no whole answer in time" in message
    assert f"within {TOTAL_SECONDS:g} s" in message


@pytest.mark.parametrize(("what", "ask"), ASKS, ids=[what for what, _ in ASKS])
def test_a_head_that_drips_is_cut_at_the_total_time(
    what: str, ask: Callable[[ControlPlaneClient], object]
) -> None:
    with scripted_server(head_drips()) as server:
        client = _client(server.origin)
        _refused_in_time(ask, client)
        # The request said it wants a connection of its own, which the bound can see and shut.
        (request,) = server.requests
        assert b"\r\nconnection: close\r\n" in request.lower()


def test_a_connection_an_answer_left_open_is_not_reused_for_a_drip() -> None:
    """The first answer keeps its connection open; whether the second request comes on it or on
    a new one, its dripping head is cut at the total time."""
    with scripted_server(answers_then(config_document(), head_drips()), head_drips()) as server:
        client = _client(server.origin)
        client.fetch_config(etag=None)
        _refused_in_time(lambda c: c.fetch_config(etag=None), client)


def test_an_answer_in_time_is_not_cut_and_leaves_no_timer_behind() -> None:
    before = set(threading.enumerate())
    with scripted_server(answers_then(config_document(), head_drips())) as server:
        client = _client(server.origin)
        fresh = client.fetch_config(etag=None)
        assert fresh.config.name == "web-01"  # type: ignore[union-attr]
    time.sleep(TOTAL_SECONDS + 0.5)
    # The bound's timer was cancelled with the answer: one still waiting would shut the sockets
    # of whatever exchange came next.
    started = [t for t in threading.enumerate() if t not in before]
    assert not [t for t in started if isinstance(t, threading.Timer) and t.is_alive()]


def _tls(tmp_path: Path) -> tuple[ssl.SSLContext, Path]:
    pki = make_pki(tmp_path / "pki")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    return context, pki.ca


def _port(server: ScriptedServer) -> int:
    return int(server.listener.getsockname()[1])


@pytest.mark.parametrize(
    ("start", "tls"),
    [
        pytest.param(http_proxy, False, id="http_forwarded"),
        pytest.param(http_proxy, True, id="http_connect_tls"),
        pytest.param(socks5_proxy, True, id="socks5_tls"),
    ],
)
def test_a_head_that_drips_through_a_proxy_is_cut_at_the_total_time(
    start: Callable[[dict[str, int]], AbstractContextManager[Proxy]], tls: bool, tmp_path: Path
) -> None:
    context, ca = _tls(tmp_path) if tls else (None, None)
    network: dict[str, object] = {"ca_file": ca} if tls else {"insecure_http": True}
    with scripted_server(head_drips(), tls=context) as server:
        port = _port(server)
        with start({"control.example": port}) as proxy:
            scheme = "https" if tls else "http"
            client = _client(f"{scheme}://control.example:{port}", proxy=proxy.url, **network)
            _refused_in_time(lambda c: c.fetch_config(etag=None), client)
            assert proxy.destinations == [f"control.example:{port}"]
