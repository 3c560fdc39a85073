"""Every answer of the control plane is read bounded: a config poll, a claim or a swap's
confirmation answered with a body that never ends, or one that drips a byte at a time inside the
read timeout, ends within seconds — never the daemon's memory, never a minute held for ever (the
watchdog would restart the daemon into the same answer, again and again). Real loopback HTTP."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from agent_daemon.connection import wire
from agent_daemon.connection.control_plane_client import ANSWER_TIMEOUTS, ControlPlaneClient
from agent_daemon.connection.http_client import build_http_client
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.errors import BadServerAnswer, ControlPlaneUnreachable
from ground.clock import SystemClock
from ground.contract import ClaimRequest
from tests.agent_daemon.minute.test_report_answers import (
    SENT,
    TIMEOUT_SECONDS,
    dripping_body,
    endless_body,
)
from tests.agent_daemon.scripted_server import Script, head_then, scripted_server

pytestmark = pytest.mark.slow

ASKS: list[tuple[str, Callable[[ControlPlaneClient], object]]] = [
    ("config", lambda client: client.fetch_config(etag=None)),
    ("claim", lambda client: client.claim(ClaimRequest(slot_key="2026-11-30T03:00"))),
    ("confirm", lambda client: client.confirm_swap("0d7a0000-0000-4000-8000-0000000000ff")),
]


def _ask(script: Script, ask: Callable[[ControlPlaneClient], object]) -> tuple[Exception, float]:
    with scripted_server(script) as server:
        http = build_http_client(
            base_url=server.origin, credential="nwa_test", timeout_seconds=TIMEOUT_SECONDS
        )
        with http:
            client = ControlPlaneClient(http=http, server_clock=ServerClock(SystemClock()))
            started = time.monotonic()
            with pytest.raises((BadServerAnswer, ControlPlaneUnreachable)) as raised:
                ask(client)
            return raised.value, time.monotonic() - started


@pytest.mark.parametrize(("what", "ask"), ASKS, ids=[what for what, _ in ASKS])
def test_a_body_that_never_ends_is_cut_at_the_bound(
    what: str, ask: Callable[[ControlPlaneClient], object]
) -> None:
    error, _ = _ask(endless_body, ask)
    assert isinstance(error, BadServerAnswer)
    assert f"runs past {wire.MAX_ANSWER_BYTES} bytes" in str(error)
    assert SENT and SENT[-1] < 16 * 1024 * 1024


@pytest.mark.parametrize(("what", "ask"), ASKS, ids=[what for what, _ in ASKS])
def test_a_body_that_drips_is_cut_at_its_time(
    what: str, ask: Callable[[ControlPlaneClient], object]
) -> None:
    error, took = _ask(dripping_body, ask)
    assert isinstance(error, ControlPlaneUnreachable)
    assert "no whole answer in time" in str(error)
    assert took < (ANSWER_TIMEOUTS + 1) * TIMEOUT_SECONDS


def test_a_header_value_outside_ascii_is_kept_not_a_crash() -> None:
    """A server (or a proxy) naming itself `Café`: the bounded answer keeps the header's bytes as
    they came; before, copying it raised UnicodeEncodeError out of the request."""
    body = b"trust root bytes"
    answer = head_then(
        b"HTTP/1.1 200 OK\r\nServer: Caf\xe9\r\nX-Note: \xe2\x82\xac\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n" % len(body),
        body,
    )
    with scripted_server(answer) as server:
        http = build_http_client(base_url=server.origin, credential="nwa_test", timeout_seconds=5)
        with http:
            client = ControlPlaneClient(http=http, server_clock=ServerClock(SystemClock()))
            assert client.fetch_trust_root(2, max_bytes=1024) == body
