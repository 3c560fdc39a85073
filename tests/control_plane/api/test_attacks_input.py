"""Hostile request content: none of it gets a 5xx, each refusal names the field and
shows a shortened value, and nothing stored changes."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from control_plane.api.answers import MAX_SHOWN_VALUE
from control_plane.api.limits import MAX_BODY_BYTES
from control_plane.types import Pool
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease
from tests.worlds.clocks import ManualClock

SLOT = "2026-11-30T03:00"


@pytest.fixture
def world(
    api: Api,
    clock: ManualClock,
    operator_key: str,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> dict[str, Any]:
    del published
    org = make_org()
    agent = make_agent(org)
    clock.set(datetime(2026, 11, 30, 2, 1, tzinfo=UTC))
    return {
        "org": org,
        "agent": agent,
        "keys": {"operator": operator_key, "panel": org.panel_key, "agent": agent.agent_key},
    }


def _stored(pool: Pool) -> tuple[Any, ...]:
    """Everything a refused request must leave as it was."""
    with pool.connection() as conn:
        return (
            conn.execute("SELECT * FROM platform_settings").fetchall(),
            conn.execute("SELECT * FROM platform_brake").fetchall(),
            conn.execute(
                "SELECT id, update_schedule_enabled, update_schedule_times FROM agents"
            ).fetchall(),
            conn.execute("SELECT count(*) FROM runs").fetchall(),
            conn.execute("SELECT count(*) FROM webhooks").fetchall(),
            conn.execute("SELECT count(*) FROM claim_refusals").fetchall(),
        )


def _send(api: Api, key: str, method: str, path: str, raw: str) -> Any:
    with api.client(key) as client:
        return client.request(
            method, path, content=raw.encode("utf-8"), headers={"Content-Type": "application/json"}
        )


# (audience, method, path, raw JSON body, the field the refusal must name)
HOSTILE = [
    pytest.param(
        "agent",
        "POST",
        "/v1/agent/claims",
        '{"slot_key": "2026-11-30T03:0\\u0000"}',
        "slot_key",
        id="nul_in_claim_slot_key_on_the_hot_path",
    ),
    pytest.param(
        "agent",
        "POST",
        "/v1/agent/claims",
        '{"slot_key": "\\ud800"}',
        "slot_key",
        id="lone_surrogate_in_claim_slot_key",
    ),
    pytest.param(
        "agent",
        "POST",
        "/v1/agent/runs",
        '{"slot_key": "2026-11-30T03:00\\u0000", "status": "up_to_date"}',
        "slot_key",
        id="nul_in_nothing_to_do_slot_key",
    ),
    pytest.param(
        "agent",
        "PATCH",
        "/v1/agent/runs/00000000-0000-0000-0000-000000000000",
        '{"status": "failed", "version": "1.5\\u0000"}',
        "version",
        id="nul_in_outcome_version",
    ),
    pytest.param(
        "operator",
        "PUT",
        "/v1/admin/settings",
        '{"timezone": "\\udfff"}',
        "timezone",
        id="lone_surrogate_in_timezone",
    ),
    pytest.param(
        "operator",
        "PUT",
        "/v1/admin/settings",
        '{"timezone": "Europe/\\u0000"}',
        "timezone",
        id="nul_in_timezone",
    ),
    pytest.param(
        "operator",
        "PUT",
        "/v1/admin/brake",
        '{"engaged": true, "reason": "a\\ud800"}',
        "reason",
        id="lone_surrogate_in_brake_reason",
    ),
    pytest.param(
        "panel",
        "PUT",
        "/v1/webhook",
        '{"url": "https://hooks.example/\\ud800"}',
        "url",
        id="lone_surrogate_in_webhook_url",
    ),
    pytest.param(
        "panel",
        "PUT",
        "/v1/agents/{agent_id}/schedule",
        '{"enabled": true, "times": ["03:00", "\\u0000"]}',
        "times[1]",
        id="nul_in_a_schedule_time",
    ),
    pytest.param(
        "operator",
        "PUT",
        "/v1/admin/settings",
        '{"\\u0000": 1}',
        "body",
        id="nul_in_a_key",
    ),
    pytest.param(
        "operator",
        "PUT",
        "/v1/admin/settings",
        '{"global_cap": NaN}',
        "global_cap",
        id="nan_for_a_cap",
    ),
    pytest.param(
        "operator",
        "PUT",
        "/v1/admin/settings",
        '{"global_cap": 1e400}',
        "global_cap",
        id="infinite_number_for_a_cap",
    ),
    pytest.param(
        "operator",
        "PUT",
        "/v1/admin/settings",
        '{"global_cap": 99999999999999999999}',
        "global_cap",
        id="integer_beyond_the_column",
    ),
    pytest.param(
        "operator",
        "PUT",
        "/v1/admin/settings",
        '{"catch_up_minutes": 2.5}',
        "catch_up_minutes",
        id="fraction_for_minutes",
    ),
    pytest.param(
        "operator",
        "PUT",
        "/v1/admin/settings",
        '{"global_cap": false}',
        "global_cap",
        id="boolean_for_a_cap_would_halt_every_update",
    ),
    pytest.param(
        "operator",
        "PUT",
        "/v1/admin/settings",
        '{"org_cap": true}',
        "org_cap",
        id="boolean_true_for_a_cap",
    ),
    pytest.param(
        "operator",
        "PUT",
        "/v1/admin/settings",
        '{"org_cap": "3"}',
        "org_cap",
        id="text_for_a_cap",
    ),
    pytest.param(
        "operator",
        "PUT",
        "/v1/admin/settings",
        '{"timezone": "localtime"}',
        "timezone",
        id="host_dependent_zone_localtime",
    ),
    pytest.param(
        "operator",
        "PUT",
        "/v1/admin/settings",
        '{"timezone": "posixrules"}',
        "timezone",
        id="host_dependent_zone_posixrules",
    ),
    pytest.param(
        "operator",
        "PUT",
        "/v1/admin/settings",
        '{"timezone": "Factory"}',
        "timezone",
        id="zone_factory",
    ),
    pytest.param(
        "operator",
        "PUT",
        "/v1/admin/settings",
        '{"timezone": "../../../etc/passwd"}',
        "timezone",
        id="zone_path_traversal",
    ),
    pytest.param(
        "operator",
        "PUT",
        "/v1/admin/settings",
        '{"timezone": "Mars/Olympus"}',
        "timezone",
        id="unknown_zone",
    ),
    pytest.param(
        "operator",
        "PUT",
        "/v1/admin/settings",
        '{"timezone": 3}',
        "timezone",
        id="number_for_a_zone",
    ),
]


@pytest.mark.parametrize(("audience", "method", "path", "raw", "field"), HOSTILE)
def test_hostile_content_is_a_422_naming_the_field_and_changes_nothing(
    api: Api,
    pool: Pool,
    world: dict[str, Any],
    audience: str,
    method: str,
    path: str,
    raw: str,
    field: str,
) -> None:
    before = _stored(pool)
    response = _send(
        api, world["keys"][audience], method, path.format(agent_id=world["agent"].agent_id), raw
    )
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail["message"].startswith(f"{field}: ") or f"{field}: " in detail["message"]
    assert _stored(pool) == before


@pytest.mark.parametrize(
    ("path", "where"),
    [
        pytest.param("/v1/forecast?date=2026-11-30%00", "query", id="nul_in_query"),
        pytest.param("/v1/agents/%00", "path", id="nul_in_path"),
    ],
)
def test_a_nul_in_the_address_is_a_422(
    api: Api, world: dict[str, Any], path: str, where: str
) -> None:
    with api.client(world["keys"]["panel"]) as client:
        response = client.get(path)
    assert response.status_code == 422
    assert response.json()["detail"]["message"].startswith(f"{where}: ")


def test_a_long_value_within_the_body_limit_is_echoed_shortened(
    api: Api, pool: Pool, world: dict[str, Any]
) -> None:
    before = _stored(pool)
    long_time = "9" * 50_000
    with api.client(world["keys"]["panel"]) as client:
        response = client.put(
            f"/v1/agents/{world['agent'].agent_id}/schedule",
            json={"enabled": True, "times": [long_time]},
        )
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert detail["field"] == "times[0]"
    assert len(detail["value"]) < MAX_SHOWN_VALUE + 40
    assert detail["value"].startswith("9999")
    assert len(response.content) < 2000
    assert _stored(pool) == before


def test_a_body_over_the_limit_by_content_length_is_refused_before_reading(
    api: Api, pool: Pool, world: dict[str, Any]
) -> None:
    before = _stored(pool)
    body = b'{"org_cap": 3, "pad": "' + b"x" * MAX_BODY_BYTES + b'"}'
    with api.client(world["keys"]["operator"]) as client:
        response = client.put(
            "/v1/admin/settings", content=body, headers={"Content-Type": "application/json"}
        )
    assert response.status_code == 413
    assert response.json()["detail"]["code"] == "request_too_large"
    assert "X-Nachtwacht-Server-Time" in response.headers
    assert _stored(pool) == before


def test_a_body_over_the_limit_without_a_credential_is_refused_too(
    api: Api, pool: Pool, world: dict[str, Any]
) -> None:
    before = _stored(pool)
    with api.client() as client:
        response = client.post(
            "/v1/agent/claims",
            content=b"[" + b"1," * MAX_BODY_BYTES + b"1]",
            headers={"Content-Type": "application/json"},
        )
    assert response.status_code == 413
    assert _stored(pool) == before


def _chunked(api: Api, key: str, path: str, chunks: Iterator[bytes]) -> tuple[int, bytes]:
    """A raw HTTP/1.1 request with a chunked body (no Content-Length), its status and body."""
    host, port = api.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(
            f"PUT {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
        )
        try:
            for chunk in chunks:
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server answered and closed while we were still sending: the point
        answer = b""
        while b"\r\n\r\n" not in answer:
            received = sock.recv(65536)
            if not received:
                break
            answer += received
        head, _, rest = answer.partition(b"\r\n\r\n")
        # The body may come in later packets than the head: read all its Content-Length says.
        length = next(
            (
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")[1:]
                if line.lower().startswith(b"content-length:")
            ),
            0,
        )
        while len(rest) < length:
            received = sock.recv(65536)
            if not received:
                break
            rest += received
        return int(head.split()[1]), rest


def test_a_chunked_body_is_counted_as_it_arrives(
    api: Api, pool: Pool, world: dict[str, Any]
) -> None:
    before = _stored(pool)

    def endless() -> Iterator[bytes]:
        yield b'{"pad": "'
        for _ in range(64):  # 4 MiB offered; the server stops reading after 64 KiB
            yield b"x" * 65536

    status, _ = _chunked(api, world["keys"]["operator"], "/v1/admin/settings", endless())
    assert status == 413
    assert _stored(pool) == before


def test_a_chunked_body_is_checked_for_unstorable_text_too(
    api: Api, pool: Pool, world: dict[str, Any]
) -> None:
    """A body without a Content-Length is still a body: the check at the door reads it (requests
    with no body at all skip the reading, and chunked ones must not be taken for them)."""
    before = _stored(pool)
    body = b'{"timezone": "Europe/Amsterdam\\u0000"}'
    status, answer = _chunked(api, world["keys"]["operator"], "/v1/admin/settings", iter([body]))
    assert status == 422
    message = json.loads(answer)["detail"]["message"]
    assert message.startswith("timezone: contains a NUL character"), message
    assert _stored(pool) == before


def test_a_request_without_a_body_passes_the_door_unread(api: Api, world: dict[str, Any]) -> None:
    """No Content-Length and no Transfer-Encoding: nothing to count, and the route still answers
    (the poll and `/healthz` take this way); `Content-Length: 0` likewise."""
    with api.client(world["keys"]["panel"]) as client:
        plain = client.get("/healthz")
        empty = client.get("/healthz", headers={"Content-Length": "0"})
    assert plain.status_code == empty.status_code == 200
    assert "X-Nachtwacht-Server-Time" in plain.headers


@pytest.mark.parametrize(
    "range_header",
    [
        pytest.param("bytes=" + "9" * 5000 + "-", id="five_thousand_digit_start"),
        pytest.param("bytes=0-" + "9" * 150, id="huge_end"),
        pytest.param("bytes=-" + "9" * 150, id="huge_suffix"),
        pytest.param("bytes=" + "9" * 150 + "-", id="huge_start"),
        pytest.param("bytes=00000000000000000000000000000000005-9", id="zero_padded"),
        pytest.param("bytes=5-2", id="backwards"),
        pytest.param("bytes=0-1,2-3," * 500, id="many_ranges"),
    ],
)
def test_an_absurd_range_header_is_no_5xx(
    api: Api, world: dict[str, Any], range_header: str
) -> None:
    agent = world["agent"]
    with api.client(agent.agent_key) as client:
        claimed = client.post("/v1/agent/claims", json={"slot_key": SLOT, "from_version": "1"})
        assert claimed.status_code == 201
        url = claimed.json()["release"]["artifact_url"]
        response = client.get(url, headers={"Range": range_header})
    assert response.status_code in {200, 206, 416}
