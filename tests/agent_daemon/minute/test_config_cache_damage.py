"""The config cache damaged on disk, or handed an ETag no request can carry: the daemon's minute
goes on (a full config poll instead of the conditional one), never a crash every minute until
someone removes the file, and nothing else in the state directory changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_daemon.connection.control_plane_client import ControlPlaneClient, FreshConfig
from agent_daemon.connection.http_client import build_http_client
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.disk.atomic_file import read_versioned_json, write_versioned_json
from ground.clock import SystemClock
from tests.agent_daemon.minute.test_daemon_attacks import make
from tests.agent_daemon.network_support.servers import AGENT_ID
from tests.agent_daemon.scripted_server import head_then, scripted_server

CACHE = "config-cache.json"


def _damaged(field: str, value: object) -> Any:
    return lambda document: {**document, field: value}


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(_damaged("etag", 5), id="etag_a_number"),
        pytest.param(_damaged("etag", {"a": 1}), id="etag_an_object"),
        pytest.param(_damaged("etag", '"\u00e9t\u20ac"'), id="etag_not_ascii"),
        pytest.param(_damaged("etag", '"x"\r\nX-Injected: 1'), id="etag_with_a_line_break"),
        pytest.param(_damaged("etag", '"' + "e" * 100_000 + '"'), id="etag_huge"),
    ],
)
def test_a_cached_etag_no_request_can_carry_costs_a_full_poll_not_the_minute(
    tmp_path: Path, damage: Any
) -> None:
    h, _ = make(tmp_path)
    assert h.daemon.tick() == "dispatched"
    cache = tmp_path / CACHE
    document = read_versioned_json(cache, format_version=1)
    assert document is not None
    write_versioned_json(cache, damage(document), format_version=1)
    state_before = (tmp_path / "daemon-state.json").read_bytes()
    outbox_before = sorted(p.name for p in (tmp_path / "outbox").rglob("*"))

    h.restart()
    assert h.daemon.tick() == "no_slot"

    assert "tick.crashed" not in h.event_names()
    assert "tick.failed" not in h.event_names()
    repaired = read_versioned_json(cache, format_version=1)
    assert repaired is not None and repaired["etag"] == document["etag"]
    assert (tmp_path / "daemon-state.json").read_bytes() == state_before
    assert sorted(p.name for p in (tmp_path / "outbox").rglob("*")) == outbox_before


CONFIG = json.dumps(
    {
        "agent_id": str(AGENT_ID),
        "schedule": {"enabled": True, "times": ["03:00"]},
        "timezone": "Europe/Amsterdam",
        "catch_up_minutes": 15,
        "brake": {"engaged": False, "reason": None},
    }
).encode()


@pytest.mark.parametrize(
    "etag",
    [
        pytest.param(b'"\xe9t\xe9"', id="latin1_bytes"),
        pytest.param(b'"\xe2\x82\xac"', id="utf8_bytes"),
    ],
)
def test_an_etag_no_request_can_carry_is_not_kept(etag: bytes) -> None:
    """A control plane (or something on the way) that answers an ETag of bytes outside ASCII:
    the config is taken, its ETag dropped, and the next poll is a plain one."""
    answer = head_then(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nETag: "
        + etag
        + b"\r\nContent-Length: %d\r\nConnection: close\r\n" % len(CONFIG),
        CONFIG,
    )
    with scripted_server(answer, answer) as server:
        http = build_http_client(base_url=server.origin, credential="nwa_test", timeout_seconds=5)
        with http:
            client = ControlPlaneClient(http=http, server_clock=ServerClock(SystemClock()))
            first = client.fetch_config(etag=None)
            assert isinstance(first, FreshConfig)
            assert first.etag is None
            second = client.fetch_config(etag=first.etag)
            assert isinstance(second, FreshConfig)
    assert b"if-none-match" not in server.requests[1].lower()
