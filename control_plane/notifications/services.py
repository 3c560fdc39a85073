"""The organisation's notifications (written by the worker's review, read and marked in the
panel) and its webhook settings: all their SQL."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from control_plane.errors import InvalidInput, NotFound
from control_plane.inputs import plain_address
from control_plane.notifications.addresses import (
    ADDRESS_REFUSED,
    MAX_URL_LENGTH,
    AddressNotAllowed,
    WebhookAddressPolicy,
    WebhookAddressRefused,
)
from control_plane.types import Connection, Pool
from ground.contract import Instant

__all__ = [
    "NotificationPage",
    "NotificationService",
    "NotificationView",
    "SavedWebhook",
    "WebhookSettingsService",
    "WebhookView",
    "checked_webhook",
    "write_notification",
]

MAX_PAGE = 200
MIN_SECRET = 16
MAX_SECRET = 200


@dataclass(frozen=True, kw_only=True)
class NotificationView:
    id: UUID
    slot_key: str
    slot_at: Instant
    created_at: Instant
    read: bool
    read_at: Instant | None
    summary: str | None
    body: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class NotificationPage:
    unread: int
    notifications: tuple[NotificationView, ...]


@dataclass(frozen=True, kw_only=True)
class SavedWebhook:
    """The stored webhook; `secret` only when the control plane generated it (shown this once)."""

    url: str
    updated_at: Instant
    secret: str | None = None


@dataclass(frozen=True, kw_only=True)
class WebhookView:
    url: str
    updated_at: Instant
    deliveries: dict[str, int]


_PAGE = (
    "SELECT id, slot_key, slot_at, created_at, read_at, body FROM notifications"
    " WHERE org_id = %s ORDER BY created_at DESC, slot_at DESC, id LIMIT %s"
)
_UNREAD_PAGE = (
    "SELECT id, slot_key, slot_at, created_at, read_at, body FROM notifications"
    " WHERE org_id = %s AND read_at IS NULL ORDER BY created_at DESC, slot_at DESC, id LIMIT %s"
)


def _notification_view(row: dict[str, Any]) -> NotificationView:
    return NotificationView(
        id=row["id"],
        slot_key=row["slot_key"],
        slot_at=row["slot_at"],
        created_at=row["created_at"],
        read=row["read_at"] is not None,
        read_at=row["read_at"],
        summary=row["body"].get("summary"),
        body=row["body"],
    )


def write_notification(
    conn: Connection,
    *,
    org_id: UUID,
    slot_key: str,
    slot_at: datetime,
    body: dict[str, Any],
    now: datetime,
) -> UUID:
    """Store one organisation's notification for one slot and queue it for its webhook."""
    row = conn.execute(
        "INSERT INTO notifications (org_id, slot_key, slot_at, created_at, body)"
        " VALUES (%s, %s, %s, %s, %s) RETURNING id",
        [org_id, slot_key, slot_at, now, Jsonb(body)],
    ).fetchone()
    assert row is not None
    notification_id: UUID = row["id"]
    # Queued for the organisation's webhook, if it has one; the inbox needs nothing more.
    conn.execute(
        "INSERT INTO webhook_deliveries (notification_id, org_id, next_attempt_at)"
        " SELECT %s, org_id, %s FROM webhooks WHERE org_id = %s",
        [notification_id, now, org_id],
    )
    return notification_id


class NotificationService:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def list(self, org_id: UUID, *, unread_only: bool, limit: int) -> NotificationPage:
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInput("limit", limit, f"is out of range (expected 1 to {MAX_PAGE})")
        with self._pool.connection() as conn:
            # Two statements, not `(NOT %s OR read_at IS NULL)`: each has an index to walk
            # newest first (all of an organisation's, or its unread ones).
            rows = conn.execute(_UNREAD_PAGE if unread_only else _PAGE, [org_id, limit]).fetchall()
            unread = conn.execute(
                "SELECT count(*) AS n FROM notifications WHERE org_id = %s AND read_at IS NULL",
                [org_id],
            ).fetchone()
        assert unread is not None
        return NotificationPage(
            unread=unread["n"], notifications=tuple(_notification_view(row) for row in rows)
        )

    def mark_read(
        self, org_id: UUID, notification_id: UUID, *, read: bool, now: datetime
    ) -> NotificationView:
        with self._pool.connection() as conn:
            row = conn.execute(
                "UPDATE notifications SET read_at = CASE WHEN %s"
                " THEN coalesce(read_at, %s::timestamptz) END"
                " WHERE id = %s AND org_id = %s"
                " RETURNING id, slot_key, slot_at, created_at, read_at, body",
                [read, now, notification_id, org_id],
            ).fetchone()
        if row is None:
            raise NotFound(
                f"notification {notification_id} does not exist in this organisation",
                code="notification_not_found",
            )
        return _notification_view(row)


def checked_webhook(
    url: object, secret: object, policy: WebhookAddressPolicy | None = None
) -> tuple[str, str | None]:
    """The URL and (optional) secret, or a 422 naming the field, the value and what is expected.
    The URL's address is held to `policy` (`addresses`): public addresses unless allowed."""
    if not isinstance(url, str) or not url.strip() or "\x00" in url:
        raise InvalidInput("url", url, "must be an http:// or https:// URL")
    url = url.strip()
    try:
        (policy or WebhookAddressPolicy()).check_url(url)
    except AddressNotAllowed as exc:
        raise InvalidInput("url", url, str(exc), code=ADDRESS_REFUSED) from exc
    except WebhookAddressRefused as exc:
        raise InvalidInput("url", url, str(exc)) from exc
    plain_address("url", url, MAX_URL_LENGTH)
    if secret is None:
        return url, None
    if isinstance(secret, str) and "\x00" in secret:
        raise InvalidInput("secret", "(hidden)", "contains a NUL character (not storable text)")
    if not isinstance(secret, str) or not MIN_SECRET <= len(secret) <= MAX_SECRET:
        shown = "(hidden)" if isinstance(secret, str) else secret
        raise InvalidInput(
            "secret",
            shown,
            f"must be a string of {MIN_SECRET} to {MAX_SECRET} characters"
            " (leave it out and one is generated)",
        )
    return url, secret


class WebhookSettingsService:
    def __init__(self, pool: Pool, policy: WebhookAddressPolicy | None = None) -> None:
        self._pool = pool
        self._policy = policy or WebhookAddressPolicy()

    def put(self, org_id: UUID, *, url: object, secret: object, now: datetime) -> SavedWebhook:
        """Store the organisation's webhook. A generated secret is returned this once only."""
        checked_url, given = checked_webhook(url, secret, self._policy)
        chosen = given if given is not None else "nwh_" + secrets.token_urlsafe(32)
        with self._pool.connection() as conn:
            conn.execute(
                "INSERT INTO webhooks (org_id, url, secret, updated_at) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (org_id) DO UPDATE SET url = EXCLUDED.url,"
                " secret = EXCLUDED.secret, updated_at = EXCLUDED.updated_at",
                [org_id, checked_url, chosen, now],
            )
        return SavedWebhook(
            url=checked_url, updated_at=now, secret=chosen if given is None else None
        )

    def get(self, org_id: UUID) -> WebhookView:
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT url, updated_at FROM webhooks WHERE org_id = %s", [org_id]
            ).fetchone()
            deliveries = conn.execute(
                "SELECT state, count(*) AS n FROM webhook_deliveries WHERE org_id = %s"
                " GROUP BY state",
                [org_id],
            ).fetchall()
        if row is None:
            raise NotFound("this organisation has no webhook", code="webhook_not_found")
        return WebhookView(
            url=row["url"],
            updated_at=row["updated_at"],
            deliveries={d["state"]: d["n"] for d in deliveries},
        )

    def delete(self, org_id: UUID) -> None:
        with self._pool.connection() as conn:
            conn.execute("DELETE FROM webhooks WHERE org_id = %s", [org_id])
