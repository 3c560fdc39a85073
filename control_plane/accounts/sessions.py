"""The panel's sign-in sessions (migration 0006), held server-side: opened at sign-in, found on
every page, closed at sign-out — and ended by their credential's revocation on every replica."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, TypeVar
from uuid import UUID

from psycopg import sql
from psycopg.rows import DictRow

from control_plane.accounts.credentials import Audience, secret_sha256
from control_plane.types import Pool

__all__ = [
    "ABSOLUTE_LIFETIME",
    "IDLE_LIMIT",
    "MADE_ONCE_WAIT_SECONDS",
    "ONCE_FORM_PATTERN",
    "OpenedSession",
    "PanelSession",
    "SessionService",
    "end_session",
    "find_live_session",
]

# A working day at most, and half an hour without a request ends a panel session: a panel left
# open on a shared screen does not stay signed in overnight.
ABSOLUTE_LIFETIME = timedelta(hours=12)
IDLE_LIMIT = timedelta(minutes=30)
# last_seen_at is written at most this often, so browsing does not write on every page.
TOUCH_EVERY = timedelta(minutes=1)
# A panel form's one-use token (`panel/once.py`); the table's CHECK holds the same pattern.
ONCE_FORM_PATTERN = r"[A-Za-z0-9_-]{20,64}"
# Taking a form's token forgets this many tokens older than a session at most.
_FORGOTTEN_PER_TAKE = 100
# How long a second sending of a form waits for the first to make its secret, and how often it
# looks: making a secret is one short transaction.
MADE_ONCE_WAIT_SECONDS = 10.0
_MADE_ONCE_POLL_SECONDS = 0.05

_Made = TypeVar("_Made")

# A session secret is 43 characters; anything far longer is not one, and is not hashed.
MAX_SESSION_SECRET = 200


@dataclass(frozen=True, kw_only=True)
class OpenedSession:
    """A new sign-in session: `secret` goes into the browser's cookie and is never stored."""

    secret: str
    expires_at: datetime


@dataclass(frozen=True, kw_only=True)
class PanelSession:
    """A live sign-in session: the credential it was opened with, its audience and scope; or,
    for a named person (`accounts.people`), the person, their name and role (no credential)."""

    credential_id: UUID | None
    audience: Audience
    org_id: UUID | None
    expires_at: datetime
    person_id: UUID | None = None
    person_name: str | None = None
    # A key signs in as an editor: panel keys stay for automation, which changes things.
    role: str = "editor"

    @property
    def may_change(self) -> bool:
        return self.role == "editor"

    @property
    def person(self) -> tuple[UUID, str] | None:
        """The named person signed in (their id and name), or None for a key's session."""
        if self.person_id is None:
            return None
        return (self.person_id, self.person_name or "")


class SessionService:
    """The panel's sign-in sessions (migration 0006), held server-side.

    The row holds only the secret's sha256. A session is live while its row exists, it is neither
    past its absolute end nor idle too long, and its credential is not revoked: `find` joins the
    credential, so revoking a key ends its sessions at once, on every replica.
    """

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def open(self, credential_id: UUID, *, now: datetime) -> OpenedSession:
        secret = secrets.token_urlsafe(32)
        expires_at = now + ABSOLUTE_LIFETIME
        with self._pool.connection() as conn, conn.transaction():
            # Ended sessions are removed as new ones open, so the table never grows unbounded.
            conn.execute(
                "DELETE FROM panel_sessions WHERE expires_at <= %s OR last_seen_at <= %s",
                [now, now - IDLE_LIMIT],
            )
            conn.execute(
                "INSERT INTO panel_sessions (secret_sha256, credential_id, created_at,"
                " last_seen_at, expires_at) VALUES (%s, %s, %s, %s, %s)",
                [secret_sha256(secret), credential_id, now, now, expires_at],
            )
        return OpenedSession(secret=secret, expires_at=expires_at)

    def made_once(self, token: str, make: Callable[[], _Made], *, now: datetime) -> _Made | None:
        """`make()` for the form whose one-use token is `token`, or None when that form made its
        secret already (`panel/once.py`).

        The sending that takes the token (inserts its row) makes the secret; when `make()` raises
        (the form was refused), the row is removed again, so the form can be sent again. A second
        sending meanwhile waits, polling, until the row says `made` (None) or is gone (it tries
        again, and is refused as the first was). No connection is held while `make()` runs: it
        takes its own from the same pool, which may hold one (`--pool-size 1`). Tokens older than
        a session are forgotten a few at a time.
        """
        deadline = time.monotonic() + MADE_ONCE_WAIT_SECONDS
        while True:
            with self._pool.connection() as conn:
                conn.execute(
                    "DELETE FROM panel_sent_forms WHERE token IN (SELECT token FROM"
                    " panel_sent_forms WHERE sent_at <= %s ORDER BY sent_at LIMIT %s)",
                    [now - ABSOLUTE_LIFETIME, _FORGOTTEN_PER_TAKE],
                )
                taken = conn.execute(
                    "INSERT INTO panel_sent_forms (token, sent_at) VALUES (%s, %s)"
                    " ON CONFLICT (token) DO NOTHING RETURNING token",
                    [token, now],
                ).fetchone()
            if taken is not None:
                return self._make_taken(token, make)
            if self._made_or_gone(token, deadline):
                return None

    def _make_taken(self, token: str, make: Callable[[], _Made]) -> _Made:
        try:
            made = make()
        except BaseException:
            with self._pool.connection() as conn:
                conn.execute("DELETE FROM panel_sent_forms WHERE token = %s", [token])
            raise
        with self._pool.connection() as conn:
            conn.execute("UPDATE panel_sent_forms SET made = true WHERE token = %s", [token])
        return made

    def _made_or_gone(self, token: str, deadline: float) -> bool:
        """True once the token's secret is made (or the wait is over: the sending that took it
        is as good as made); False once its row is gone (its form was refused: take it again)."""
        while time.monotonic() < deadline:
            with self._pool.connection() as conn:
                row = conn.execute(
                    "SELECT made FROM panel_sent_forms WHERE token = %s", [token]
                ).fetchone()
            if row is None:
                return False
            if row["made"]:
                return True
            time.sleep(_MADE_ONCE_POLL_SECONDS)
        return True

    def find(self, secret: str | None, *, now: datetime) -> PanelSession | None:
        """The live session behind `secret`, or None (unknown, ended, idle, or key revoked)."""
        row = find_live_session(
            self._pool,
            "panel_sessions",
            "SELECT s.credential_id, s.last_seen_at, s.expires_at, c.audience, c.org_id"
            " FROM panel_sessions s JOIN credentials c ON c.id = s.credential_id"
            " WHERE s.secret_sha256 = %s AND c.revoked_at IS NULL"
            " AND s.expires_at > %s AND s.last_seen_at > %s",
            secret,
            now,
        )
        if row is None:
            return None
        return PanelSession(
            credential_id=row["credential_id"],
            audience=Audience(row["audience"]),
            org_id=row["org_id"],
            expires_at=row["expires_at"],
        )

    def close(self, secret: str | None) -> None:
        """Sign out: the session ends on every replica at once."""
        end_session(self._pool, "panel_sessions", secret)


def find_live_session(
    pool: Pool,
    table: Literal["panel_sessions", "person_sessions"],
    query: str,
    secret: str | None,
    now: datetime,
) -> DictRow | None:
    """The row `query` finds for the live session behind `secret`, or None; `query` takes the
    secret's digest, `now` and the idle cutoff, and selects the session's `last_seen_at`.

    A found session's `last_seen_at` moves to `now`, at most every `TOUCH_EVERY`: browsing keeps a
    session alive without a write on every page."""
    if not secret or len(secret) > MAX_SESSION_SECRET:
        return None
    digest = secret_sha256(secret)
    with pool.connection() as conn:
        row = conn.execute(query, [digest, now, now - IDLE_LIMIT]).fetchone()
        if row is not None and now - row["last_seen_at"] >= TOUCH_EVERY:
            conn.execute(
                sql.SQL(
                    "UPDATE {} SET last_seen_at = %s WHERE secret_sha256 = %s AND last_seen_at < %s"
                ).format(sql.Identifier(table)),
                [now, digest, now],
            )
    return row


def end_session(
    pool: Pool, table: Literal["panel_sessions", "person_sessions"], secret: str | None
) -> None:
    """Remove the session behind `secret`, if there is one: it ends on every replica at once."""
    if not secret or len(secret) > MAX_SESSION_SECRET:
        return
    with pool.connection() as conn:
        conn.execute(
            sql.SQL("DELETE FROM {} WHERE secret_sha256 = %s").format(sql.Identifier(table)),
            [secret_sha256(secret)],
        )
