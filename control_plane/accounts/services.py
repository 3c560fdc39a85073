"""Organisations, agents' enrolment, the credentials of the three audiences and the panel's
sign-in sessions opened with them: all their SQL.

Every method that stamps a row takes `now` from its caller (a request, a CLI command)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

import psycopg

from control_plane.accounts.credentials import (
    Audience,
    new_secret,
    secret_sha256,
    secrets_match,
)
from control_plane.errors import Conflict, Forbidden, InvalidInput, NotFound, Unauthenticated
from control_plane.inputs import stored_text
from control_plane.types import Connection, Pool

__all__ = [
    "ABSOLUTE_LIFETIME",
    "AGENT_OF_CREDENTIAL",
    "IDLE_LIMIT",
    "AccountService",
    "IssuedAgent",
    "IssuedOrg",
    "OpenedSession",
    "PanelSession",
    "Principal",
    "SessionService",
]

MAX_NAME_LENGTH = 200

# A working day at most, and half an hour without a request ends a panel session: a panel left
# open on a shared screen does not stay signed in overnight.
ABSOLUTE_LIFETIME = timedelta(hours=12)
IDLE_LIMIT = timedelta(minutes=30)
# last_seen_at is written at most this often, so browsing does not write on every page.
TOUCH_EVERY = timedelta(minutes=1)
# A session secret is 43 characters; anything far longer is not one, and is not hashed.
MAX_SESSION_SECRET = 200

# The agent a presented agent credential belongs to, as a subquery: the agents' two calls of
# every minute (the config poll and the claim) read it in the same statement as their data, so
# the hot path is one round trip and a revoked credential (`revoked_at`) is refused at once —
# there is no cache to outlive it. Nothing found is not an answer: the caller then asks
# `authenticate`, which tells 401 from 403.
AGENT_OF_CREDENTIAL = (
    "SELECT c.agent_id FROM credentials c WHERE c.secret_sha256 = %(secret_sha256)s"
    " AND c.audience = 'agent' AND c.revoked_at IS NULL"
)


@dataclass(frozen=True, kw_only=True)
class Principal:
    """Who is calling: the audience and the scope its credential grants."""

    audience: Audience
    credential_id: UUID
    org_id: UUID | None = None
    agent_id: UUID | None = None


@dataclass(frozen=True, kw_only=True)
class IssuedOrg:
    org_id: UUID
    name: str
    panel_key: str


@dataclass(frozen=True, kw_only=True)
class IssuedAgent:
    agent_id: UUID
    org_id: UUID
    name: str
    agent_key: str


def _checked_name(field: str, name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput(field, name, "must be a non-empty name")
    stored_text(field, name, MAX_NAME_LENGTH)
    return name.strip()


def _store_secret(
    conn: Connection,
    audience: Audience,
    *,
    org_id: UUID | None = None,
    agent_id: UUID | None = None,
    label: str | None = None,
) -> str:
    label = stored_text("label", label, MAX_NAME_LENGTH)
    secret = new_secret(audience)
    conn.execute(
        "INSERT INTO credentials (audience, secret_sha256, org_id, agent_id, label)"
        " VALUES (%s, %s, %s, %s, %s)",
        [audience.value, secret_sha256(secret), org_id, agent_id, label],
    )
    return secret


def _require_org(conn: Connection, org_id: UUID) -> None:
    if conn.execute("SELECT 1 FROM orgs WHERE id = %s", [org_id]).fetchone() is None:
        raise NotFound(f"organisation {org_id} does not exist", code="org_not_found")


class AccountService:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def create_org(self, name: str, *, now: datetime) -> IssuedOrg:
        """A new organisation and its first panel key (shown once)."""
        clean = _checked_name("name", name)
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute(
                "INSERT INTO orgs (name, created_at) VALUES (%s, %s) RETURNING id",
                [clean, now],
            ).fetchone()
            assert row is not None
            key = _store_secret(conn, Audience.PANEL, org_id=row["id"], label="created with org")
        return IssuedOrg(org_id=row["id"], name=clean, panel_key=key)

    def create_panel_key(self, org_id: UUID, label: str | None = None) -> str:
        with self._pool.connection() as conn, conn.transaction():
            _require_org(conn, org_id)
            return _store_secret(conn, Audience.PANEL, org_id=org_id, label=label)

    def enroll_agent(self, org_id: UUID, name: str, *, now: datetime) -> IssuedAgent:
        """A new agent in `org_id` and its credential (shown once). Its schedule is the default."""
        clean = _checked_name("name", name)
        with self._pool.connection() as conn:
            try:
                with conn.transaction():
                    _require_org(conn, org_id)
                    row = conn.execute(
                        "INSERT INTO agents (org_id, name, created_at) VALUES (%s, %s, %s)"
                        " RETURNING id",
                        [org_id, clean, now],
                    ).fetchone()
                    assert row is not None
                    key = _store_secret(conn, Audience.AGENT, org_id=org_id, agent_id=row["id"])
            except psycopg.errors.UniqueViolation as exc:
                raise Conflict(
                    f"name: {clean!r} is already an agent of organisation {org_id}",
                    code="agent_exists",
                ) from exc
        return IssuedAgent(agent_id=row["id"], org_id=org_id, name=clean, agent_key=key)

    def create_operator_key(self, label: str | None = None) -> str:
        with self._pool.connection() as conn, conn.transaction():
            return _store_secret(conn, Audience.OPERATOR, label=label)

    def authenticate(self, secret: str | None, audience: Audience) -> Principal:
        """The caller behind `secret`, if it was issued to `audience`.

        Unknown or revoked → 401; issued to another audience → 403.
        """
        if secret is None:
            raise Unauthenticated("a bearer credential is required (Authorization: Bearer …)")
        presented = secret_sha256(secret)
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT id, audience, secret_sha256, org_id, agent_id FROM credentials"
                " WHERE secret_sha256 = %s AND revoked_at IS NULL",
                [presented],
            ).fetchone()
        if row is None or not secrets_match(row["secret_sha256"], presented):
            raise Unauthenticated("the credential is not known (or was revoked)")
        if row["audience"] != audience.value:
            raise Forbidden(
                f"this endpoint is for {audience.value} credentials, not {row['audience']} ones"
            )
        return Principal(
            audience=audience,
            credential_id=row["id"],
            org_id=row["org_id"],
            agent_id=row["agent_id"],
        )


@dataclass(frozen=True, kw_only=True)
class OpenedSession:
    """A new sign-in session: `secret` goes into the browser's cookie and is never stored."""

    secret: str
    expires_at: datetime


@dataclass(frozen=True, kw_only=True)
class PanelSession:
    """A live sign-in session: the credential it was opened with, its audience and scope."""

    credential_id: UUID
    audience: Audience
    org_id: UUID | None
    expires_at: datetime


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

    def find(self, secret: str | None, *, now: datetime) -> PanelSession | None:
        """The live session behind `secret`, or None (unknown, ended, idle, or key revoked)."""
        if not secret or len(secret) > MAX_SESSION_SECRET:
            return None
        digest = secret_sha256(secret)
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
            audience=Audience(row["audience"]),
            org_id=row["org_id"],
            expires_at=row["expires_at"],
        )

    def close(self, secret: str | None) -> None:
        """Sign out: the session ends on every replica at once."""
        if not secret or len(secret) > MAX_SESSION_SECRET:
            return
        with self._pool.connection() as conn:
            conn.execute(
                "DELETE FROM panel_sessions WHERE secret_sha256 = %s", [secret_sha256(secret)]
            )
