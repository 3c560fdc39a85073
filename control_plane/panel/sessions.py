"""Sign-in sessions held in PostgreSQL, and the CSRF tokens derived from them.

The browser holds a random secret (the cookie); the database holds only its sha256. A session is
valid while its row exists, it is neither past its absolute end nor idle too long, and the
credential it was opened with is not revoked: the lookup joins the credential, so revoking a key
ends its sessions at once, on every replica. Every function takes `now`; none reads a clock.

CSRF: a signed-in form carries a token derived from the session secret (HMAC), which a page of
another site cannot read or compute. The sign-in form, before any session exists, carries the
value of a short-lived cookie of its own (double submit). Both cookies are SameSite=Strict, which
already keeps other sites' forms from sending them; the token is the second, independent lock.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from control_plane.types import Pool

__all__ = [
    "ABSOLUTE_LIFETIME",
    "IDLE_LIMIT",
    "PanelSession",
    "SessionStore",
    "csrf_token_for",
    "new_signin_token",
    "tokens_match",
]

# A working day at most, and half an hour without a request ends a session: a panel left open on
# a shared screen does not stay signed in overnight.
ABSOLUTE_LIFETIME = timedelta(hours=12)
IDLE_LIMIT = timedelta(minutes=30)
# last_seen_at is written at most this often, so browsing does not write on every page.
TOUCH_EVERY = timedelta(minutes=1)


@dataclass(frozen=True, kw_only=True)
class PanelSession:
    """A signed-in browser: the credential's audience ("panel" or "operator") and scope."""

    credential_id: UUID
    audience: str
    org_id: UUID | None
    csrf_token: str
    expires_at: datetime


def _sha256(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def csrf_token_for(session_secret: str) -> str:
    """The CSRF token of the session whose cookie holds `session_secret`."""
    return hmac.new(session_secret.encode("utf-8"), b"nachtwacht panel csrf", "sha256").hexdigest()


def new_signin_token() -> str:
    return secrets.token_urlsafe(32)


def tokens_match(expected: str | None, presented: str | None) -> bool:
    if not expected or not presented:
        return False
    return hmac.compare_digest(expected.encode("utf-8"), presented.encode("utf-8"))


class SessionStore:
    """The panel_sessions table (migration 0006)."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def open(self, credential_id: UUID, *, now: datetime) -> str:
        """A new session for `credential_id`; returns the secret for the cookie (never stored)."""
        secret = secrets.token_urlsafe(32)
        with self._pool.connection() as conn, conn.transaction():
            # Ended sessions are removed as new ones open, so the table never grows unbounded.
            conn.execute(
                "DELETE FROM panel_sessions WHERE expires_at <= %s OR last_seen_at <= %s",
                [now, now - IDLE_LIMIT],
            )
            conn.execute(
                "INSERT INTO panel_sessions (secret_sha256, credential_id, created_at,"
                " last_seen_at, expires_at) VALUES (%s, %s, %s, %s, %s)",
                [_sha256(secret), credential_id, now, now, now + ABSOLUTE_LIFETIME],
            )
        return secret

    def find(self, secret: str | None, *, now: datetime) -> PanelSession | None:
        """The live session behind `secret`, or None (unknown, ended, idle, or key revoked)."""
        if not secret or len(secret) > 200:
            return None
        digest = _sha256(secret)
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT s.credential_id, s.last_seen_at, s.expires_at, c.audience, c.org_id"
                " FROM panel_sessions s JOIN credentials c ON c.id = s.credential_id"
                " WHERE s.secret_sha256 = %s AND c.revoked_at IS NULL"
                " AND s.expires_at > %s AND s.last_seen_at > %s",
                [digest, now, now - IDLE_LIMIT],
            ).fetchone()
            if row is None:
                return None
            if now - row["last_seen_at"] >= TOUCH_EVERY:
                conn.execute(
                    "UPDATE panel_sessions SET last_seen_at = %s WHERE secret_sha256 = %s"
                    " AND last_seen_at < %s",
                    [now, digest, now],
                )
        return PanelSession(
            credential_id=row["credential_id"],
            audience=row["audience"],
            org_id=row["org_id"],
            csrf_token=csrf_token_for(secret),
            expires_at=row["expires_at"],
        )

    def close(self, secret: str | None) -> None:
        if not secret:
            return
        with self._pool.connection() as conn:
            conn.execute("DELETE FROM panel_sessions WHERE secret_sha256 = %s", [_sha256(secret)])
