"""Webhook delivery: each notification POSTed to the organisation's URL, signed, retried.

The request body is the notification as JSON, the same bytes on every attempt. Headers:

    X-Nachtwacht-Timestamp: 1764468000              Unix seconds when this attempt was signed
    X-Nachtwacht-Signature: sha256=<hex>            HMAC-SHA256(secret, f"{timestamp}." + body)
    Idempotency-Key: <notification id>              the same on every attempt

The timestamp is inside the signed bytes so a captured request cannot be replayed later with a
fresh timestamp; a receiver checks the signature over the raw body it received (before parsing)
and refuses timestamps too far from its own clock (`verify_signature`). A 2xx answer is delivery;
anything else, or no answer, is retried with exponential backoff in product time, and every attempt
is recorded in `webhook_attempts`. After `max_attempts` the delivery is `failed`; the notification
stays in the inbox either way.

Every failure of an attempt — an HTTP status, a refused or unresolvable address (`addresses`), a
URL the client cannot use, or anything unexpected — is that delivery's recorded error and is
retried by the same policy: one organisation's bad URL never stops another's delivery in the pass.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import httpx

from control_plane.notifications.addresses import (
    Resolver,
    WebhookAddressPolicy,
    WebhookAddressRefused,
    pinned_send,
    resolve_host,
)
from control_plane.types import Connection, Pool
from ground.contract import format_instant
from ground.contract.plain_text import inert_values

__all__ = [
    "IDEMPOTENCY_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "DeliveryPolicy",
    "WebhookSender",
    "sign_body",
    "verify_signature",
]

SIGNATURE_HEADER = "X-Nachtwacht-Signature"
TIMESTAMP_HEADER = "X-Nachtwacht-Timestamp"
IDEMPOTENCY_HEADER = "Idempotency-Key"

logger = logging.getLogger(__name__)


def sign_body(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header's value for `body` sent at `timestamp` (Unix seconds)."""
    mac = hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode("ascii") + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def verify_signature(
    secret: str,
    *,
    body: bytes,
    timestamp: str,
    signature: str,
    now: datetime,
    tolerance: timedelta = timedelta(minutes=5),
) -> bool:
    """What a receiver does: the raw body, the two headers, its own clock."""
    try:
        sent = int(timestamp)
    except ValueError:
        return False
    if abs(now.timestamp() - sent) > tolerance.total_seconds():
        return False
    return hmac.compare_digest(sign_body(secret, sent, body), signature)


@dataclass(frozen=True, kw_only=True)
class DeliveryPolicy:
    max_attempts: int = 6
    first_backoff: timedelta = timedelta(minutes=1)
    timeout_seconds: float = 10.0

    def backoff(self, attempt: int) -> timedelta:
        """Wait after failed attempt `attempt` (1-based): 1, 2, 4, 8, … * first_backoff."""
        return self.first_backoff * int(2 ** (attempt - 1))


_DUE = """
SELECT d.notification_id, d.attempts, w.url, w.secret, n.org_id, n.slot_key, n.created_at, n.body
  FROM webhook_deliveries d
  JOIN notifications n ON n.id = d.notification_id
  JOIN webhooks w ON w.org_id = d.org_id
 WHERE d.state = 'pending' AND d.next_attempt_at <= %s
 ORDER BY d.next_attempt_at
 LIMIT %s
"""


def delivery_body(row: dict[str, Any]) -> bytes:
    payload = {
        "id": str(row["notification_id"]),
        "org_id": str(row["org_id"]),
        "slot_key": row["slot_key"],
        "created_at": format_instant(row["created_at"]),
        "notification": row["body"],
    }
    # The stored summary may quote an agent's text from a row that predates its being stored
    # inert: the customer's receiver gets it inert, as every JSON answer.
    return json.dumps(inert_values(payload), sort_keys=True, separators=(",", ":")).encode("utf-8")


@dataclass(frozen=True, kw_only=True)
class AttemptOutcome:
    notification_id: UUID
    outcome: str  # delivered | retry | failed


class WebhookSender:
    """Sends the due deliveries. The HTTP client is built here, once; tests pass `transport`."""

    def __init__(
        self,
        pool: Pool,
        policy: DeliveryPolicy | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        batch: int = 50,
        addresses: WebhookAddressPolicy | None = None,
        resolve: Resolver = resolve_host,
    ) -> None:
        self._pool = pool
        self._policy = policy or DeliveryPolicy()
        self._batch = batch
        self._addresses = addresses or WebhookAddressPolicy()
        self._resolve = resolve
        self._client = httpx.Client(
            timeout=self._policy.timeout_seconds, follow_redirects=False, transport=transport
        )

    def close(self) -> None:
        self._client.close()

    def deliver_due(self, now: datetime) -> list[AttemptOutcome]:
        """One attempt for every delivery due at `now` (product time)."""
        with self._pool.connection() as conn:
            due = conn.execute(_DUE, [now, self._batch]).fetchall()
        outcomes = []
        for row in due:
            try:
                outcomes.append(self._attempt(row, now))
            except Exception:  # recording this one failed; the others still get their turn
                logger.exception(
                    "webhook for notification %s: the attempt could not be recorded",
                    row["notification_id"],
                )
        return outcomes

    def _post(self, url: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
        """POST to the address that was checked, with the URL's own Host header and TLS name."""
        return pinned_send(
            self._client, self._addresses, self._resolve, "POST", url, content=body, headers=headers
        )

    def _attempt(self, row: dict[str, Any], now: datetime) -> AttemptOutcome:
        body = delivery_body(row)
        # The control plane's clock, like every instant it states (a fake one in tests and demos).
        timestamp = int(now.timestamp())
        headers = {
            "Content-Type": "application/json",
            TIMESTAMP_HEADER: str(timestamp),
            SIGNATURE_HEADER: sign_body(row["secret"], timestamp, body),
            IDEMPOTENCY_HEADER: str(row["notification_id"]),
            "User-Agent": "nachtwacht-webhook/1",
        }
        status_code: int | None = None
        error: str | None = None
        try:
            response = self._post(row["url"], body, headers)
            status_code = response.status_code
            if not response.is_success:
                error = f"HTTP {status_code}"
        except WebhookAddressRefused as exc:
            error = f"address refused: {exc}"[:500]
        except Exception as exc:  # a name that does not resolve, a bad URL, anything at all:
            # this delivery's error, retried by the policy, never the pass's
            error = f"{type(exc).__name__}: {exc}"[:500]
        attempt = row["attempts"] + 1
        if error is None:
            outcome = "delivered"
        elif attempt >= self._policy.max_attempts:
            outcome = "failed"
        else:
            outcome = "retry"
        with self._pool.connection() as conn, conn.transaction():
            _record_attempt(
                conn,
                row["notification_id"],
                attempt=attempt,
                url=row["url"],
                status_code=status_code,
                error=error,
                outcome=outcome,
                now=now,
                next_attempt_at=now + self._policy.backoff(attempt),
            )
        if outcome != "delivered":
            logger.warning(
                "webhook for notification %s, attempt %d: %s (%s)",
                row["notification_id"],
                attempt,
                error,
                outcome,
            )
        return AttemptOutcome(notification_id=row["notification_id"], outcome=outcome)


def _record_attempt(
    conn: Connection,
    notification_id: UUID,
    *,
    attempt: int,
    url: str,
    status_code: int | None,
    error: str | None,
    outcome: str,
    now: datetime,
    next_attempt_at: datetime,
) -> None:
    conn.execute(
        "INSERT INTO webhook_attempts (notification_id, attempt, at, url, status_code, error,"
        " outcome) VALUES (%s, %s, %s, %s, %s, %s, %s)",
        [notification_id, attempt, now, url, status_code, error, outcome],
    )
    conn.execute(
        "UPDATE webhook_deliveries SET attempts = %(attempt)s, last_error = %(error)s,"
        " state = CASE %(outcome)s WHEN 'retry' THEN 'pending' ELSE %(outcome)s END,"
        " next_attempt_at = CASE %(outcome)s WHEN 'retry' THEN %(next)s::timestamptz END,"
        " delivered_at = CASE %(outcome)s WHEN 'delivered' THEN %(now)s::timestamptz END"
        " WHERE notification_id = %(id)s",
        {
            "attempt": attempt,
            "error": error,
            "outcome": outcome,
            "next": next_attempt_at,
            "now": now,
            "id": notification_id,
        },
    )
