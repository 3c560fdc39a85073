"""Organisations, agents' enrolment, the credentials of the three audiences and the panel's
sign-in sessions opened with them: all their SQL.

Every method that stamps a row takes `now` from its caller (a request, a CLI command). A
credential carries the name of whoever holds it (several per organisation), is listed, revoked
(refused from the next request on: authentication reads the row every time) and rotated (a new
secret with the same scope and name; the old one revoked at once). Issuing, revoking, rotating
and deleting an agent are operator actions on the trail (`events.trail`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg

from control_plane.accounts.credentials import (
    Audience,
    new_secret,
    secret_sha256,
    secrets_match,
)
from control_plane.agent_scope import require_org
from control_plane.errors import Conflict, Forbidden, InvalidInput, NotFound, Unauthenticated
from control_plane.events.trail import Actor, ActorKind, record_action
from control_plane.host_sightings import stamp_hosts
from control_plane.inputs import plain_name
from control_plane.types import Connection, Pool
from ground.contract import HOST_ID_HEADER, Instant

__all__ = [
    "AGENT_OF_CREDENTIAL",
    "FIRST_PANEL_KEY",
    "HOST_ID_PATTERN",
    "UNNAMED_OPERATOR_KEY",
    "UNNAMED_PANEL_KEY",
    "AccountService",
    "CredentialList",
    "CredentialView",
    "DeletedAgent",
    "IssuedAgent",
    "IssuedCredential",
    "IssuedOrg",
    "Principal",
    "actor_of",
    "add_agent",
    "agent_exists",
]

MAX_NAME_LENGTH = 200
# The names the control plane gives the keys it makes unnamed: stored as these words (the API and
# the trail carry them as they are) and said in the reader's language by the panel, which looks
# them up by these exact values.
FIRST_PANEL_KEY = "first panel key"
UNNAMED_PANEL_KEY = "panel key"
UNNAMED_OPERATOR_KEY = "operator key"
# What an agent sends as its host id (`ground.contract.HOST_ID_HEADER`); the database's CHECK too.
HOST_ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{8,64}")
# A host's sighting is written again at most this often (once an hour per host: the poll path
# stays a read nearly always; a shared identity is judged over a day).
HOST_SEEN_EVERY = timedelta(hours=1)
_STAMP_HOST = stamp_hosts("VALUES (%s, %s, %s, %s)")

_ACTOR_KINDS: dict[str, ActorKind] = {
    Audience.AGENT.value: "agent",
    Audience.PANEL.value: "user",
    Audience.OPERATOR.value: "operator",
}
_SELECT_CREDENTIALS = (
    "SELECT id, audience, name, org_id, agent_id, created_at, revoked_at, replaced_by"
    " FROM credentials"
)

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
    name: str | None = None


def actor_of(principal: Principal) -> Actor:
    """The trail's actor for a caller: its kind, its credential and that credential's name."""
    return Actor(
        kind=_ACTOR_KINDS[principal.audience.value],
        id=principal.credential_id,
        name=principal.name,
    )


@dataclass(frozen=True, kw_only=True)
class CredentialView:
    """A credential as listed: never its secret (only its sha256 is stored)."""

    id: UUID
    audience: Audience
    name: str
    org_id: UUID | None
    agent_id: UUID | None
    created_at: Instant
    revoked_at: Instant | None
    replaced_by: UUID | None


@dataclass(frozen=True, kw_only=True)
class CredentialList:
    credentials: tuple[CredentialView, ...]


@dataclass(frozen=True, kw_only=True)
class IssuedCredential:
    """A new credential and its secret, shown this once."""

    credential: CredentialView
    secret: str


@dataclass(frozen=True, kw_only=True)
class DeletedAgent:
    agent_id: UUID
    org_id: UUID
    name: str
    deleted_at: Instant
    revoked_credentials: int


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


def _credential_view(row: dict[str, Any]) -> CredentialView:
    return CredentialView(
        id=row["id"],
        audience=Audience(row["audience"]),
        name=row["name"],
        org_id=row["org_id"],
        agent_id=row["agent_id"],
        created_at=row["created_at"],
        revoked_at=row["revoked_at"],
        replaced_by=row["replaced_by"],
    )


def _store_secret(
    conn: Connection,
    audience: Audience,
    *,
    name: str,
    now: datetime | None,
    org_id: UUID | None = None,
    agent_id: UUID | None = None,
) -> tuple[str, CredentialView]:
    secret = new_secret(audience)
    row = conn.execute(
        "INSERT INTO credentials (audience, secret_sha256, org_id, agent_id, name, label,"
        " created_at) VALUES (%s, %s, %s, %s, %s, %s, coalesce(%s, now()))"
        " RETURNING id, audience, name, org_id, agent_id, created_at, revoked_at, replaced_by",
        [audience.value, secret_sha256(secret), org_id, agent_id, name, name, now],
    ).fetchone()
    assert row is not None
    return secret, _credential_view(row)


def _credential_facts(view: CredentialView) -> dict[str, Any]:
    return {
        "credential_id": str(view.id),
        "audience": view.audience.value,
        "name": view.name,
        "agent_id": None if view.agent_id is None else str(view.agent_id),
    }


def _issued(conn: Connection, view: CredentialView, actor: Actor, now: datetime, kind: str) -> None:
    # The agent is named in the data, not the event's agent column: the panel's timeline of an
    # agent is its updates, and the operators' trail finds credentials by their own fields.
    record_action(
        conn, kind=kind, actor=actor, at=now, org_id=view.org_id, data=_credential_facts(view)
    )


def add_agent(
    conn: Connection, org_id: UUID, name: str, *, now: datetime, actor: Actor
) -> IssuedAgent:
    """A new agent named `name` (already checked) in `org_id` with its organisation's default
    schedule (when it chose one, else the columns' defaults) and its credential, in the caller's
    transaction. A live agent of that
    name raises psycopg's `UniqueViolation` (the database's unique index decides, so two
    enrolments at once cannot both take a name): the caller rolls back and says `agent_exists`."""
    row = conn.execute(
        "INSERT INTO agents (org_id, name, created_at) VALUES (%s, %s, %s) RETURNING id",
        [org_id, name, now],
    ).fetchone()
    assert row is not None
    # Copied once, at enrolment: a later change of the default changes no agent.
    conn.execute(
        "UPDATE agents a SET update_schedule_enabled = o.default_schedule_enabled,"
        " update_schedule_times = o.default_schedule_times FROM orgs o"
        " WHERE a.id = %s AND o.id = a.org_id AND o.default_schedule_enabled IS NOT NULL",
        [row["id"]],
    )
    key, view = _store_secret(
        conn, Audience.AGENT, name=name, now=now, org_id=org_id, agent_id=row["id"]
    )
    _issued(conn, view, actor, now, "credential.issued")
    return IssuedAgent(agent_id=row["id"], org_id=org_id, name=name, agent_key=key)


def agent_exists(org_id: UUID, name: str) -> Conflict:
    return Conflict(
        f"name: {name!r} is already an agent of organisation {org_id}",
        code="agent_exists",
        field="name",
        value=name,
    )


class AccountService:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def create_org(self, name: str, *, now: datetime, actor: Actor | None = None) -> IssuedOrg:
        """A new organisation and its first panel key (shown once)."""
        clean = plain_name("name", name, MAX_NAME_LENGTH)
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute(
                "INSERT INTO orgs (name, created_at) VALUES (%s, %s) RETURNING id",
                [clean, now],
            ).fetchone()
            assert row is not None
            key, view = _store_secret(
                conn, Audience.PANEL, name=FIRST_PANEL_KEY, now=now, org_id=row["id"]
            )
            _issued(conn, view, actor or Actor(kind="operator"), now, "credential.issued")
        return IssuedOrg(org_id=row["id"], name=clean, panel_key=key)

    def create_panel_key(self, org_id: UUID, label: str | None = None) -> str:
        """A panel key for `org_id` named `label` (the holder); the secret, shown once."""
        return self.issue(
            Audience.PANEL,
            name=label or UNNAMED_PANEL_KEY,
            org_id=org_id,
            now=None,
            actor=Actor(kind="operator"),
        ).secret

    def issue(
        self,
        audience: Audience,
        *,
        name: object,
        org_id: UUID | None = None,
        now: datetime | None,
        actor: Actor,
    ) -> IssuedCredential:
        """A new panel (`org_id` required) or operator credential named after its holder."""
        clean = plain_name("name", name, MAX_NAME_LENGTH)
        if audience is Audience.AGENT:
            raise InvalidInput(
                "audience", audience.value, "is issued by enrolling an agent (or rotating its key)"
            )
        if (audience is Audience.PANEL) != (org_id is not None):
            raise InvalidInput(
                "org_id",
                None if org_id is None else str(org_id),
                "is required for a panel credential and refused for an operator one",
            )
        with self._pool.connection() as conn, conn.transaction():
            if org_id is not None:
                require_org(conn, org_id)
            secret, view = _store_secret(conn, audience, name=clean, now=now, org_id=org_id)
            _issued(conn, view, actor, now or view.created_at, "credential.issued")
        return IssuedCredential(credential=view, secret=secret)

    def enroll_agent(
        self, org_id: UUID, name: str, *, now: datetime, actor: Actor | None = None
    ) -> IssuedAgent:
        """A new agent in `org_id` and its credential (shown once). Its schedule is the default."""
        clean = plain_name("name", name, MAX_NAME_LENGTH)
        with self._pool.connection() as conn:
            try:
                with conn.transaction():
                    require_org(conn, org_id)
                    issued = add_agent(
                        conn, org_id, clean, now=now, actor=actor or Actor(kind="operator")
                    )
            except psycopg.errors.UniqueViolation as exc:
                raise agent_exists(org_id, clean) from exc
        return issued

    def create_operator_key(self, label: str | None = None) -> str:
        """An operator key named `label` (the holder); the secret, shown once."""
        return self.issue(
            Audience.OPERATOR,
            name=label or UNNAMED_OPERATOR_KEY,
            now=None,
            actor=Actor(kind="operator"),
        ).secret

    def list_credentials(
        self,
        *,
        audience: Audience | None = None,
        org_id: UUID | None = None,
        agent_id: UUID | None = None,
        include_revoked: bool = False,
    ) -> CredentialList:
        with self._pool.connection() as conn:
            rows = conn.execute(
                _SELECT_CREDENTIALS
                + " WHERE (%(audience)s::text IS NULL OR audience = %(audience)s)"
                " AND (%(org)s::uuid IS NULL OR org_id = %(org)s)"
                " AND (%(agent)s::uuid IS NULL OR agent_id = %(agent)s)"
                " AND (%(all)s OR revoked_at IS NULL)"
                " ORDER BY created_at, id",
                {
                    "audience": None if audience is None else audience.value,
                    "org": org_id,
                    "agent": agent_id,
                    "all": include_revoked,
                },
            ).fetchall()
        return CredentialList(credentials=tuple(_credential_view(row) for row in rows))

    def revoke(self, credential_id: UUID, *, now: datetime, actor: Actor) -> CredentialView:
        """Refuse the credential from the next request on. Revoking it again changes nothing."""
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute(
                "UPDATE credentials SET revoked_at = %s WHERE id = %s AND revoked_at IS NULL"
                " RETURNING id, audience, name, org_id, agent_id, created_at, revoked_at,"
                " replaced_by",
                [now, credential_id],
            ).fetchone()
            if row is None:
                return self._existing(conn, credential_id)
            view = _credential_view(row)
            _issued(conn, view, actor, now, "credential.revoked")
        return view

    def rotate(self, credential_id: UUID, *, now: datetime, actor: Actor) -> IssuedCredential:
        """A new secret with the same audience, scope and name; the old one is revoked at once
        (whoever holds it must be given the new one: there is no overlap to forget about)."""
        with self._pool.connection() as conn, conn.transaction():
            old = conn.execute(
                _SELECT_CREDENTIALS + " WHERE id = %s FOR UPDATE",
                [credential_id],
            ).fetchone()
            if old is None:
                raise _credential_not_found(credential_id)
            if old["revoked_at"] is not None:
                raise Conflict(
                    f"credential {credential_id} is revoked; issue a new one instead",
                    code="credential_revoked",
                )
            secret, view = _store_secret(
                conn,
                Audience(old["audience"]),
                name=old["name"],
                now=now,
                org_id=old["org_id"],
                agent_id=old["agent_id"],
            )
            conn.execute(
                "UPDATE credentials SET revoked_at = %s, replaced_by = %s WHERE id = %s",
                [now, view.id, credential_id],
            )
            record_action(
                conn,
                kind="credential.rotated",
                actor=actor,
                at=now,
                org_id=view.org_id,
                data={**_credential_facts(view), "replaces": str(credential_id)},
            )
        return IssuedCredential(credential=view, secret=secret)

    def _existing(self, conn: Connection, credential_id: UUID) -> CredentialView:
        row = conn.execute(_SELECT_CREDENTIALS + " WHERE id = %s", [credential_id]).fetchone()
        if row is None:
            raise _credential_not_found(credential_id)
        return _credential_view(row)

    def delete_agent(self, agent_id: UUID, *, now: datetime, actor: Actor) -> DeletedAgent:
        """Take the agent out of its organisation: its credentials are revoked, it leaves the
        panel, the forecast and the worker's slots; its runs and events stay for the operators,
        and its name is free for a new enrolment."""
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute(
                "UPDATE agents SET deleted_at = %s WHERE id = %s AND deleted_at IS NULL"
                " RETURNING id, org_id, name, deleted_at",
                [now, agent_id],
            ).fetchone()
            if row is None:
                raise NotFound(
                    f"agent {agent_id} does not exist (or was deleted)", code="agent_not_found"
                )
            revoked = conn.execute(
                "UPDATE credentials SET revoked_at = %s WHERE agent_id = %s AND revoked_at IS NULL",
                [now, agent_id],
            ).rowcount
            record_action(
                conn,
                kind="agent.deleted",
                actor=actor,
                at=now,
                org_id=row["org_id"],
                agent_id=agent_id,
                data={"name": row["name"], "revoked_credentials": revoked},
            )
        return DeletedAgent(
            agent_id=row["id"],
            org_id=row["org_id"],
            name=row["name"],
            deleted_at=row["deleted_at"],
            revoked_credentials=revoked,
        )

    def authenticate(
        self,
        secret: str | None,
        audience: Audience,
        *,
        host_id: str | None = None,
        now: datetime | None = None,
    ) -> Principal:
        """The caller behind `secret`, if it was issued to `audience`.

        Unknown or revoked → 401; issued to another audience → 403. An agent's `host_id` (the
        header its host sends) is recorded, so one credential answered by two hosts shows.
        """
        if secret is None:
            raise Unauthenticated("a bearer credential is required (Authorization: Bearer …)")
        if host_id is not None:
            check_host_id(host_id)
        presented = secret_sha256(secret)
        with self._pool.connection() as conn:
            # One read, as before: the host's last sighting rides along (a primary-key lookup).
            row = conn.execute(
                "SELECT c.id, c.audience, c.secret_sha256, c.org_id, c.agent_id, c.name,"
                " (SELECT h.last_seen_at FROM agent_hosts h"
                "   WHERE h.agent_id = c.agent_id AND h.host_id = %s) AS host_seen_at"
                " FROM credentials c WHERE c.secret_sha256 = %s AND c.revoked_at IS NULL",
                [host_id, presented],
            ).fetchone()
            if row is None or not secrets_match(row["secret_sha256"], presented):
                raise Unauthenticated("the credential is not known (or was revoked)")
            if row["audience"] != audience.value:
                raise Forbidden(
                    f"this endpoint is for {audience.value} credentials, not {row['audience']} ones"
                )
            if (
                host_id is not None
                and now is not None
                and row["agent_id"] is not None
                and (row["host_seen_at"] is None or now - row["host_seen_at"] >= HOST_SEEN_EVERY)
            ):
                conn.execute(_STAMP_HOST, [row["agent_id"], host_id, now, now])
        return Principal(
            audience=audience,
            credential_id=row["id"],
            org_id=row["org_id"],
            agent_id=row["agent_id"],
            name=row["name"],
        )


def check_host_id(host_id: str) -> None:
    """The 422 for a host id an agent's host cannot have sent (`HOST_ID_HEADER`)."""
    if HOST_ID_PATTERN.fullmatch(host_id) is None:
        raise InvalidInput(
            HOST_ID_HEADER,
            host_id,
            "is not a host id (8 to 64 letters, digits, '-' or '_')",
            code="invalid_request",
        )


def _credential_not_found(credential_id: UUID) -> NotFound:
    return NotFound(f"credential {credential_id} does not exist", code="credential_not_found")
