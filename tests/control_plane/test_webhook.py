"""Webhook delivery: the notification POSTed to the organisation's URL, signed with
HMAC-SHA256 over the timestamp and the raw body, one idempotency key per notification, retried
with backoff, every attempt recorded — against a real HTTP receiver on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from uuid import UUID

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.notifications.addresses import WebhookAddressPolicy
from control_plane.notifications.delivery import sign_body, verify_signature
from control_plane.registry import Services, build_services
from control_plane.types import Pool
from signed_release.keys import key_id
from tests.control_plane.conftest import Api
from tests.control_plane.reconcile_fleet import AFTER_NIGHT, Fleet

SECRET = "a-shared-secret-of-enough-length"
# The receivers here listen on 127.0.0.1: the operator setting that lets webhooks reach loopback
# (`serve --webhook-allow-network 127.0.0.0/8`). Without it, loopback is refused (see
# tests/control_plane/api/test_attacks_webhooks.py).
LOOPBACK_ALLOWED = WebhookAddressPolicy.allowing(["127.0.0.0/8"])


@pytest.fixture
def services(pool: Pool, release_key: Ed25519PrivateKey) -> Services:
    public = release_key.public_key()
    return build_services(pool, {key_id(public): public}, webhook_policy=LOOPBACK_ALLOWED)


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """Answers each POST with the next status of `answers` (then 200) and keeps what it got."""

    url: str
    answers: list[int] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state.received.append(Received(headers=dict(self.headers.items()), body=body))
            status = state.answers.pop(0) if state.answers else 200
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            del format, args

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/nachtwacht"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _notify_with_webhook(fleet: Fleet, services: Services, url: str) -> UUID:
    """An organisation with a webhook and one missed agent: one notification after the pass."""
    org = fleet.org()
    services.webhooks.put(org, url=url, secret=SECRET, now=fleet.clock.now())
    fleet.agent(org, "web-01")
    return org


def _attempts(fleet: Fleet) -> list[tuple[int, str, int | None]]:
    return [
        (row["attempt"], row["outcome"], row["status_code"])
        for row in fleet.rows(
            "SELECT attempt, outcome, status_code FROM webhook_attempts ORDER BY attempt"
        )
    ]


def test_the_receiver_gets_a_signed_notification(
    fleet: Fleet, services: Services, receiver: Receiver
) -> None:
    org = _notify_with_webhook(fleet, services, receiver.url)
    fleet.reconcile(AFTER_NIGHT)
    [got] = receiver.received
    [notification] = fleet.notifications(org)
    assert verify_signature(
        SECRET,
        body=got.body,
        timestamp=got.headers["X-Nachtwacht-Timestamp"],
        signature=got.headers["X-Nachtwacht-Signature"],
        now=AFTER_NIGHT,
    )
    assert got.headers["Idempotency-Key"] == str(notification["id"])
    assert got.headers["X-Nachtwacht-Timestamp"] == str(int(AFTER_NIGHT.timestamp()))
    payload = json.loads(got.body)
    assert payload["id"] == str(notification["id"]) and payload["org_id"] == str(org)
    assert payload["notification"]["missed"][0]["name"] == "web-01"
    assert _attempts(fleet) == [(1, "delivered", 200)]


def test_a_failed_delivery_is_retried_with_backoff_and_the_same_key(
    fleet: Fleet, services: Services, receiver: Receiver
) -> None:
    _notify_with_webhook(fleet, services, receiver.url)
    receiver.answers = [500, 503]
    fleet.reconcile(AFTER_NIGHT)  # attempt 1 → 500, next in 1 minute
    fleet.reconcile(AFTER_NIGHT + timedelta(seconds=30))  # not due yet
    fleet.reconcile(AFTER_NIGHT + timedelta(minutes=1))  # attempt 2 → 503, next in 2 minutes
    fleet.reconcile(AFTER_NIGHT + timedelta(minutes=2))  # not due yet
    fleet.reconcile(AFTER_NIGHT + timedelta(minutes=3))  # attempt 3 → 200
    assert _attempts(fleet) == [(1, "retry", 500), (2, "retry", 503), (3, "delivered", 200)]
    assert len({r.headers["Idempotency-Key"] for r in receiver.received}) == 1
    assert len({r.body for r in receiver.received}) == 1  # the same bytes every time
    delivery = fleet.one("SELECT state, attempts, next_attempt_at FROM webhook_deliveries")
    assert delivery == {"state": "delivered", "attempts": 3, "next_attempt_at": None}


def test_delivery_gives_up_after_the_last_attempt(
    fleet: Fleet, services: Services, receiver: Receiver
) -> None:
    org = _notify_with_webhook(fleet, services, receiver.url)
    receiver.answers = [500, 500, 500, 500]
    for minutes in (0, 1, 3, 7, 15):
        fleet.reconcile(AFTER_NIGHT + timedelta(minutes=minutes))
    assert [outcome for _, outcome, _ in _attempts(fleet)] == ["retry", "retry", "failed"]
    assert fleet.one("SELECT state, last_error FROM webhook_deliveries") == {
        "state": "failed",
        "last_error": "HTTP 500",
    }
    assert len(fleet.notifications(org)) == 1  # the inbox keeps it


def test_an_unreachable_receiver_is_an_attempt_with_its_error(
    fleet: Fleet, services: Services
) -> None:
    # A port held by this socket, bound but never listening: a connection there is refused, and
    # no other process can take the port meanwhile (one merely free a moment ago could be).
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        _notify_with_webhook(fleet, services, f"http://127.0.0.1:{port}/nowhere")
        fleet.reconcile(AFTER_NIGHT)
    assert _attempts(fleet) == [(1, "retry", None)]
    error = fleet.one("SELECT last_error FROM webhook_deliveries")["last_error"]
    assert error.startswith("ConnectError")


def test_an_organisation_without_a_webhook_gets_no_delivery(fleet: Fleet) -> None:
    fleet.agent(fleet.org(), "web-01")
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.rows("SELECT * FROM webhook_deliveries") == []


NOW = datetime(2026, 11, 30, 2, 20, tzinfo=UTC)
BODY = b'{"id":"n-1"}'
STAMP = str(int(NOW.timestamp()))


@pytest.mark.parametrize(
    ("body", "timestamp", "signature", "valid"),
    [
        pytest.param(BODY, STAMP, sign_body(SECRET, int(STAMP), BODY), True, id="genuine"),
        pytest.param(
            b'{"id":"n-2"}', STAMP, sign_body(SECRET, int(STAMP), BODY), False, id="body_changed"
        ),
        pytest.param(
            BODY,
            str(int(STAMP) + 60),
            sign_body(SECRET, int(STAMP), BODY),
            False,
            id="timestamp_changed",
        ),
        pytest.param(
            BODY,
            str(int(STAMP) - 3600),
            sign_body(SECRET, int(STAMP) - 3600, BODY),
            False,
            id="replayed_an_hour_later",
        ),
        pytest.param(
            BODY,
            STAMP,
            sign_body("another-secret-entirely", int(STAMP), BODY),
            False,
            id="wrong_secret",
        ),
        pytest.param(BODY, "soon", sign_body(SECRET, int(STAMP), BODY), False, id="bad_stamp"),
    ],
)
def test_signature_verification(body: bytes, timestamp: str, signature: str, valid: bool) -> None:
    assert (
        verify_signature(SECRET, body=body, timestamp=timestamp, signature=signature, now=NOW)
        is valid
    )


def test_put_webhook_generates_a_secret_shown_once(api: Api, make_org) -> None:
    org = make_org("Acme")
    with api.client(org.panel_key) as client:
        put = client.put("/v1/webhook", json={"url": "https://hooks.example.com/nw"})
        assert put.status_code == 200
        assert put.json()["secret"].startswith("nwh_")
        shown = client.get("/v1/webhook").json()
    assert shown == {
        "url": "https://hooks.example.com/nw",
        "updated_at": "2026-11-30T01:00:00Z",
        "deliveries": {},
    }


def test_put_webhook_with_a_secret_does_not_echo_it(api: Api, make_org) -> None:
    org = make_org("Acme")
    with api.client(org.panel_key) as client:
        put = client.put("/v1/webhook", json={"url": "https://h.example/x", "secret": SECRET})
        assert "secret" not in put.json()
        assert client.delete("/v1/webhook").status_code == 204
        assert client.get("/v1/webhook").status_code == 404


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(
            {"url": "ftp://h.example/x"},
            "url: 'ftp://h.example/x' must be an http:// or https:// URL with a host"
            " (at most 2000 characters)",
            id="not_http",
        ),
        pytest.param({"url": 42}, "url: 42 must be an http:// or https:// URL", id="not_text"),
        pytest.param(
            {"url": "https://user:pw@h.example/x"},
            "url: 'https://user:pw@h.example/x' must not carry a user name or password",
            id="credentials_in_url",
        ),
        pytest.param(
            {"url": "https://h.example/x", "secret": "short"},
            "secret: '(hidden)' must be a string of 16 to 200 characters"
            " (leave it out and one is generated)",
            id="short_secret",
        ),
        pytest.param(
            {"url": "https://h.example/x", "secret": 12345678901234567},
            "secret: 12345678901234567 must be a string of 16 to 200 characters"
            " (leave it out and one is generated)",
            id="secret_not_text",
        ),
    ],
)
def test_put_webhook_refuses_bad_input_naming_it(
    api: Api, make_org, body: dict[str, Any], message: str
) -> None:
    org = make_org("Acme")
    with api.client(org.panel_key) as client:
        response = client.put("/v1/webhook", json=body)
    assert response.status_code == 422
    assert response.json()["detail"]["message"] == message


def test_the_database_refuses_a_webhook_that_is_not_http(fleet: Fleet) -> None:
    org = fleet.org()
    with pytest.raises(psycopg.errors.CheckViolation):
        fleet.sql(
            "INSERT INTO webhooks (org_id, url, secret, updated_at) VALUES (%s, %s, %s, now())",
            [org, "file:///etc/passwd", SECRET],
        )
