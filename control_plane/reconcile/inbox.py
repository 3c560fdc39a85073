"""The organisation's side: its notifications (read/unread) and its webhook settings."""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

from control_plane.errors import InvalidInput, NotFound
from control_plane.types import Pool
from ground.clock import Clock
from ground.contract import format_instant

__all__ = ["NotificationService", "WebhookSettingsService", "checked_webhook"]

MAX_PAGE = 200
MIN_SECRET = 16
MAX_SECRET = 200


def _notification_view(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(row["id"]),
        "slot_key": row["slot_key"],
        "slot_at": format_instant(row["slot_at"]),
        "created_at": format_instant(row["created_at"]),
        "read": row["read_at"] is not None,
        "read_at": None if row["read_at"] is None else format_instant(row["read_at"]),
        "summary": row["body"].get("summary"),
        "body": row["body"],
    }


class NotificationService:
    def __init__(self, pool: Pool, clock: Clock) -> None:
        self._pool = pool
        self._clock = clock

    def list(self, org_id: UUID, *, unread_only: bool, limit: int) -> dict[str, Any]:
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInput("limit", limit, f"is out of range (expected 1 to {MAX_PAGE})")
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT id, slot_key, slot_at, created_at, read_at, body FROM notifications"
                " WHERE org_id = %s AND (NOT %s OR read_at IS NULL)"
                " ORDER BY created_at DESC, slot_at DESC, id LIMIT %s",
                [org_id, unread_only, limit],
            ).fetchall()
            unread = conn.execute(
                "SELECT count(*) AS n FROM notifications WHERE org_id = %s AND read_at IS NULL",
                [org_id],
            ).fetchone()
        assert unread is not None
        return {
            "unread": unread["n"],
            "notifications": [_notification_view(row) for row in rows],
        }

    def mark_read(self, org_id: UUID, notification_id: UUID, *, read: bool) -> dict[str, Any]:
        now = self._clock.now()
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


def checked_webhook(url: object, secret: object) -> tuple[str, str | None]:
    """The URL and (optional) secret, or a 422 naming the field, the value and what is expected."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput("url", url, "must be an http:// or https:// URL")
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname or len(url) > 2000:
        raise InvalidInput(
            "url", url, "must be an http:// or https:// URL with a host (at most 2000 characters)"
        )
    if parts.username or parts.password:
        raise InvalidInput("url", url, "must not carry a user name or password")
    if secret is None:
        return url, None
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
    def __init__(self, pool: Pool, clock: Clock) -> None:
        self._pool = pool
        self._clock = clock

    def put(self, org_id: UUID, *, url: object, secret: object) -> dict[str, Any]:
        """Store the organisation's webhook. A generated secret is returned this once only."""
        checked_url, given = checked_webhook(url, secret)
        chosen = given if given is not None else "nwh_" + secrets.token_urlsafe(32)
        now = self._clock.now()
        with self._pool.connection() as conn:
            conn.execute(
                "INSERT INTO webhooks (org_id, url, secret, updated_at) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (org_id) DO UPDATE SET url = EXCLUDED.url,"
                " secret = EXCLUDED.secret, updated_at = EXCLUDED.updated_at",
                [org_id, checked_url, chosen, now],
            )
        view = {"url": checked_url, "updated_at": format_instant(now)}
        if given is None:
            view["secret"] = chosen
        return view

    def get(self, org_id: UUID) -> dict[str, Any]:
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
        return {
            "url": row["url"],
            "updated_at": format_instant(row["updated_at"]),
            "deliveries": {d["state"]: d["n"] for d in deliveries},
        }

    def delete(self, org_id: UUID) -> None:
        with self._pool.connection() as conn:
            conn.execute("DELETE FROM webhooks WHERE org_id = %s", [org_id])
