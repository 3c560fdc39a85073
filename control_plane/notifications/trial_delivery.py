"""A test delivery of an organisation's webhook, asked for in the panel ("send a test delivery").

One signed POST to the stored address, at once, by the same rules as every real delivery: the
address policy (`addresses`: public addresses unless an operator allowed a network, the connection
pinned to the checked address) and the signature (`delivery.sign_body`, the same headers). Nothing
is retried and nothing enters the delivery queue; the result is returned as facts (status, kind of
error) for the panel to word, and recorded as an event `webhook.tested` with its actor.

The body says it is a test, so a receiver can tell it from a notification:

    {"kind": "test", "id": "<uuid>", "org_id": "<uuid>", "sent_at": "<RFC 3339>"}
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from uuid import UUID

import httpx

from control_plane.errors import NotFound
from control_plane.events.trail import Actor, record_action
from control_plane.notifications.addresses import (
    Resolver,
    WebhookAddressPolicy,
    WebhookAddressRefused,
    resolve_host,
)
from control_plane.notifications.delivery import (
    IDEMPOTENCY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    DeliveryPolicy,
    WebhookSender,
    sign_body,
)
from control_plane.types import Connection, Pool
from ground.contract import format_instant

__all__ = [
    "TEST_EVENT",
    "TestDelivery",
    "TestFailure",
    "WebhookTestService",
    "send_test_delivery",
]

TEST_EVENT = "webhook.tested"
# A person waits for the answer on the page: shorter than a queued delivery's patience.
TEST_TIMEOUT_SECONDS = 5.0

# Why a test did not arrive, as a kind the panel words per language:
#   address_refused  the address (or what its name resolves to) is not one webhooks may reach
#   unreachable      no connection (refused, reset, unresolvable name, TLS failure)
#   timeout          no answer within TEST_TIMEOUT_SECONDS
#   http_status      an answer, but not 2xx (`status_code` says which)
TestFailure = Literal["address_refused", "unreachable", "timeout", "http_status"]


@dataclass(frozen=True, kw_only=True)
class TestDelivery:
    """What became of one test delivery."""

    __test__ = False  # a result, not a pytest test class

    url: str
    sent_at: datetime
    delivered: bool
    status_code: int | None
    failure: TestFailure | None
    detail: str | None  # the technical error, for the operator's log and the folded detail


def _failure_of(exc: Exception) -> tuple[TestFailure, str]:
    if isinstance(exc, WebhookAddressRefused):
        return "address_refused", str(exc)[:500]
    if isinstance(exc, httpx.TimeoutException):
        return "timeout", f"{type(exc).__name__}: {exc}"[:500]
    return "unreachable", f"{type(exc).__name__}: {exc}"[:500]


class WebhookTestService:
    """Test deliveries; built once per process with the pool and the address policy (the same
    policy object as the worker's sender)."""

    def __init__(
        self,
        pool: Pool,
        policy: WebhookAddressPolicy | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        resolve: Resolver = resolve_host,
    ) -> None:
        self._pool = pool
        self._policy = policy or WebhookAddressPolicy()
        self._transport = transport
        self._resolve = resolve

    def send(self, org_id: UUID, *, now: datetime, actor: Actor) -> TestDelivery:
        return send_test_delivery(
            self._pool,
            org_id,
            policy=self._policy,
            now=now,
            actor=actor,
            transport=self._transport,
            resolve=self._resolve,
        )


def send_test_delivery(
    pool: Pool,
    org_id: UUID,
    *,
    policy: WebhookAddressPolicy,
    now: datetime,
    actor: Actor,
    transport: httpx.BaseTransport | None = None,
    resolve: Resolver = resolve_host,
) -> TestDelivery:
    """POST a signed test to the organisation's webhook at `now`; NotFound without a webhook."""
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT url, secret FROM webhooks WHERE org_id = %s", [org_id]
        ).fetchone()
    if row is None:
        raise NotFound("this organisation has no webhook", code="webhook_not_found")
    body, headers = _signed_test(org_id, row["secret"], now)
    # The real sender's POST (its private `_post`, used from this sibling module on purpose), so
    # the test connects exactly as a delivery would: pinned to the checked address.
    sender = WebhookSender(
        pool,
        DeliveryPolicy(timeout_seconds=TEST_TIMEOUT_SECONDS),
        transport=transport,
        addresses=policy,
        resolve=resolve,
    )
    try:
        result = _posted(sender, row["url"], body, headers, now)
    finally:
        sender.close()
    with pool.connection() as conn, conn.transaction():
        _record_tested(conn, org_id, result, actor=actor, now=now)
    return result


def _signed_test(org_id: UUID, secret: str, now: datetime) -> tuple[bytes, dict[str, str]]:
    """The test's body and its headers, signed as every real delivery is."""
    test_id = uuid.uuid4()
    body = json.dumps(
        {
            "kind": "test",
            "id": str(test_id),
            "org_id": str(org_id),
            "sent_at": format_instant(now),
        },
        sort_keys=True,
        separators=(",", ":"),
    ).encode("utf-8")
    # The control plane's clock, as for every real delivery.
    timestamp = int(now.timestamp())
    headers = {
        "Content-Type": "application/json",
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: sign_body(secret, timestamp, body),
        IDEMPOTENCY_HEADER: str(test_id),
        "User-Agent": "nachtwacht-webhook/1",
    }
    return body, headers


def _posted(
    sender: WebhookSender, url: str, body: bytes, headers: dict[str, str], now: datetime
) -> TestDelivery:
    """One POST, and what became of it as facts: a status, or the kind of failure."""
    status_code: int | None = None
    failure: TestFailure | None = None
    detail: str | None = None
    try:
        response = sender._post(url, body, headers)
        status_code = response.status_code
        if not response.is_success:
            failure, detail = "http_status", f"HTTP {status_code}"
    except Exception as exc:  # whatever went wrong is the test's answer, shown to the reader
        failure, detail = _failure_of(exc)
    return TestDelivery(
        url=url,
        sent_at=now,
        delivered=failure is None,
        status_code=status_code,
        failure=failure,
        detail=detail,
    )


def _record_tested(
    conn: Connection, org_id: UUID, result: TestDelivery, *, actor: Actor, now: datetime
) -> None:
    record_action(
        conn,
        kind=TEST_EVENT,
        actor=actor,
        at=now,
        org_id=org_id,
        data={
            "url": result.url,
            "delivered": result.delivered,
            "status_code": result.status_code,
            "failure": result.failure,
            "detail": result.detail,
        },
    )
