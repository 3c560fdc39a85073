"""Config sync and the claim/report calls: ETag/304, the server's clock, offline vs refused."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from agent_daemon.connection.config_cache import CachedConfig, ConfigCache
from agent_daemon.connection.control_plane_client import (
    ControlPlaneClient,
    FreshConfig,
    NotModified,
)
from agent_daemon.connection.http_client import build_http_client
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.disk.atomic_file import write_versioned_json
from agent_daemon.errors import (
    BadServerAnswer,
    ControlPlaneUnreachable,
    CredentialRefused,
    DaemonStateError,
)
from ground.contract import ClaimGrant, ClaimRequest, ErrorDetail
from tests.agent_daemon.daemon_support.fake_control_plane import FakeControlPlane
from tests.worlds.clocks import ManualClock, SkewedClock

NOW = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
AGENT_ID = "4b1c9a6e-0000-4000-8000-000000000001"


def client_for(
    handler: httpx.MockTransport | None = None,
    *,
    clock: ServerClock | None = None,
    base_url: str = "http://control.test",
) -> tuple[ControlPlaneClient, ServerClock]:
    server_clock = clock or ServerClock(ManualClock(NOW))
    http = build_http_client(
        base_url=base_url, credential="nwa_test_credential", timeout_seconds=5, transport=handler
    )
    return ControlPlaneClient(http=http, server_clock=server_clock), server_clock


def test_an_unchanged_config_costs_a_304(tmp_path: Path) -> None:
    plane = FakeControlPlane(now=ManualClock(NOW).now)
    client, _ = client_for(plane.transport())
    first = client.fetch_config(etag=None)
    assert isinstance(first, FreshConfig)
    assert first.etag
    assert isinstance(client.fetch_config(etag=first.etag), NotModified)
    plane.times = ("03:00", "15:00")
    changed = client.fetch_config(etag=first.etag)
    assert isinstance(changed, FreshConfig)
    assert changed.config.schedule.times == ("03:00", "15:00")


def test_the_server_clock_offset_is_learned_from_every_answer_even_a_304() -> None:
    server = ManualClock(NOW)
    plane = FakeControlPlane(now=server.now)
    host = SkewedClock(server, timedelta(hours=-5, minutes=-3))
    client, clock = client_for(plane.transport(), clock=ServerClock(host))
    first = client.fetch_config(etag=None)
    assert isinstance(first, FreshConfig)
    assert clock.offset == timedelta(hours=5, minutes=3)
    assert clock.now() == NOW
    clock.learn_offset(timedelta(0))
    assert isinstance(client.fetch_config(etag=first.etag), NotModified)
    assert clock.now() == NOW


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(httpx.ConnectError("refused"), id="connection_refused"),
        pytest.param(httpx.ReadTimeout("slow"), id="read_timeout"),
        pytest.param(httpx.ConnectTimeout("slow"), id="connect_timeout"),
    ],
)
def test_no_answer_is_offline(failure: httpx.TransportError) -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise failure

    client, _ = client_for(httpx.MockTransport(fail))
    with pytest.raises(ControlPlaneUnreachable):
        client.fetch_config(etag=None)


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_a_5xx_without_a_refusal_code_is_offline(status: int) -> None:
    client, _ = client_for(httpx.MockTransport(lambda r: httpx.Response(status, text="down")))
    with pytest.raises(ControlPlaneUnreachable, match=str(status)):
        client.fetch_config(etag=None)


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_credential_says_so(status: int) -> None:
    client, _ = client_for(
        httpx.MockTransport(lambda r: httpx.Response(status, json={"detail": "nope"}))
    )
    with pytest.raises(CredentialRefused, match="re-enroll"):
        client.fetch_config(etag=None)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(b"[]", "Input should be", id="not_an_object"),
        pytest.param(b"{", "not JSON", id="not_json"),
        pytest.param(
            json.dumps(
                {
                    "agent_id": AGENT_ID,
                    "schedule": {"enabled": True, "times": ["03:00", "03:00"]},
                    "timezone": "Europe/Amsterdam",
                    "catch_up_minutes": 15,
                    "brake": {"engaged": False},
                }
            ).encode(),
            "schedule",
            id="duplicate_times",
        ),
        pytest.param(
            json.dumps(
                {
                    "agent_id": AGENT_ID,
                    "schedule": {"enabled": True, "times": ["03:00"]},
                    "timezone": "Mars/Olympus",
                    "catch_up_minutes": 15,
                    "brake": {"engaged": False},
                }
            ).encode(),
            "timezone: found 'Mars/Olympus'",
            id="unknown_zone",
        ),
        pytest.param(
            json.dumps(
                {
                    "agent_id": AGENT_ID,
                    "schedule": {"enabled": True, "times": ["03:00"]},
                    "timezone": "Europe/Amsterdam",
                    "catch_up_minutes": 0,
                    "brake": {"engaged": False},
                }
            ).encode(),
            "catch_up_minutes: found 0",
            id="no_window",
        ),
    ],
)
def test_a_config_the_agent_cannot_use_is_a_bad_answer(body: bytes, message: str) -> None:
    client, _ = client_for(httpx.MockTransport(lambda r: httpx.Response(200, content=body)))
    with pytest.raises(BadServerAnswer, match=message):
        client.fetch_config(etag=None)


def test_a_switched_off_schedule_may_hold_no_times() -> None:
    body = {
        "agent_id": AGENT_ID,
        "schedule": {"enabled": False, "times": []},
        "timezone": "Europe/Amsterdam",
        "catch_up_minutes": 15,
        "brake": {"engaged": False},
        "future_field": {"ignored": True},
    }
    client, _ = client_for(httpx.MockTransport(lambda r: httpx.Response(200, json=body)))
    answer = client.fetch_config(etag=None)
    assert isinstance(answer, FreshConfig)
    assert answer.config.schedule.enabled is False


@pytest.mark.parametrize(
    ("status", "detail", "code", "consumes"),
    [
        pytest.param(
            429,
            {"code": "org_cap", "message": "full", "retry_after_seconds": 30},
            "org_cap",
            False,
            id="org_cap",
        ),
        pytest.param(
            429,
            {"code": "global_cap", "message": "full", "retry_after_seconds": 5},
            "global_cap",
            False,
            id="global_cap",
        ),
        pytest.param(503, {"code": "brake", "message": "maintenance"}, "brake", False, id="brake"),
        pytest.param(
            409,
            {"code": "slot_consumed", "message": "taken"},
            "slot_consumed",
            True,
            id="slot_consumed",
        ),
        pytest.param(
            409,
            {"code": "window_closed", "message": "late"},
            "window_closed",
            True,
            id="window_closed",
        ),
        pytest.param(
            422, {"code": "not_a_slot", "message": "no"}, "not_a_slot", True, id="not_a_slot"
        ),
        pytest.param(
            409,
            {"code": "release_halted", "message": "halted"},
            "release_halted",
            True,
            id="release_halted",
        ),
        # A control plane of last month answered a halt with 503: still a refusal, not offline.
        pytest.param(
            503,
            {"code": "release_halted", "message": "halted"},
            "release_halted",
            True,
            id="release_halted_as_a_503",
        ),
    ],
)
def test_claim_refusals_say_whether_the_slot_is_gone(
    status: int, detail: dict[str, object], code: str, consumes: bool
) -> None:
    client, _ = client_for(
        httpx.MockTransport(lambda r: httpx.Response(status, json={"detail": detail}))
    )
    answer = client.claim(ClaimRequest(slot_key="2026-11-30T03:00", from_version="1.4.1"))
    assert isinstance(answer, ErrorDetail)
    assert answer.refusal is not None
    assert (answer.code, answer.refusal.consumes_slot) == (code, consumes)


def test_a_grant_carries_an_absolute_artifact_url() -> None:
    plane = FakeControlPlane(now=ManualClock(NOW).now)
    client, _ = client_for(plane.transport(), base_url="https://control.example/")
    answer = client.claim(ClaimRequest(slot_key="2026-11-30T03:00", from_version="1.4.1"))
    assert isinstance(answer, ClaimGrant)
    assert client.absolute_url(answer.release.artifact_url).startswith(
        "https://control.example/v1/agent/runs/"
    )


def test_a_grant_without_a_release_is_a_bad_answer() -> None:
    client, _ = client_for(
        httpx.MockTransport(lambda r: httpx.Response(201, json={"run_id": AGENT_ID}))
    )
    with pytest.raises(BadServerAnswer, match="release: missing"):
        client.claim(ClaimRequest(slot_key="2026-11-30T03:00"))


def test_a_refusal_without_a_code_is_a_bad_answer() -> None:
    client, _ = client_for(httpx.MockTransport(lambda r: httpx.Response(418, text="teapot")))
    with pytest.raises(BadServerAnswer, match="418"):
        client.claim(ClaimRequest(slot_key="2026-11-30T03:00"))


def test_the_config_cache_round_trips_and_refuses_a_newer_format(tmp_path: Path) -> None:
    plane = FakeControlPlane(now=ManualClock(NOW).now)
    client, _ = client_for(plane.transport())
    answer = client.fetch_config(etag=None)
    assert isinstance(answer, FreshConfig)
    cache = ConfigCache(tmp_path / "config-cache.json")
    assert cache.load() is None
    cache.save(
        CachedConfig(
            config=answer.config, raw=answer.raw, etag=answer.etag, synced_at=NOW, offset_seconds=3
        )
    )
    loaded = cache.load()
    assert loaded is not None
    assert (loaded.config, loaded.etag, loaded.offset_seconds) == (answer.config, answer.etag, 3)
    write_versioned_json(cache.path, {"config": {}}, format_version=2)
    with pytest.raises(DaemonStateError, match="newer nachtwacht agent"):
        cache.load()


class _ConfigHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        assert self.headers["Authorization"] == "Bearer nwa_test_credential"
        body = json.dumps(
            {
                "agent_id": AGENT_ID,
                "schedule": {"enabled": True, "times": ["03:00"]},
                "timezone": "Europe/Amsterdam",
                "catch_up_minutes": 15,
                "brake": {"engaged": False, "reason": None},
                "release": None,
                "manual_update": None,
                "server_time": "2026-11-30T02:00:00Z",
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("ETag", '"abc"')
        self.send_header("X-Nachtwacht-Server-Time", "2026-11-30T02:00:00Z")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def loopback_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ConfigHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_the_real_client_syncs_over_loopback(loopback_server: str) -> None:
    host = ManualClock(NOW - timedelta(hours=2))
    client, clock = client_for(None, clock=ServerClock(host), base_url=loopback_server)
    answer = client.fetch_config(etag=None)
    assert isinstance(answer, FreshConfig)
    assert answer.etag == '"abc"'
    assert clock.offset == timedelta(hours=2)
