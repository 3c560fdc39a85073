"""Enrollment tokens: made, listed and revoked by operators (any organisation) and by a
customer's panel (its own), and exchanged by a host for an agent and its credential — all their
SQL.

A use is one transaction: the token's row is locked (`FOR UPDATE`), judged (`rules.verdict`),
and only then are the agent, its credential, the spent use and the trail's event written, so N
hosts using a single-use token at once make exactly one agent. A refused use writes nothing but
the refusal's event (for a token that exists; an unknown secret names no organisation). A revoked
token is answered exactly as an unknown one: the host learns nothing about a token it should not
hold. Nothing here is remembered between requests: the exchange is rare and reads the row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import psycopg

from control_plane.accounts.credentials import secret_sha256
from control_plane.accounts.services import add_agent, agent_exists
from control_plane.agent_scope import require_org
from control_plane.enrollment.rules import (
    TokenState,
    TokenTerms,
    Verdict,
    new_token_secret,
    token_refusal,
    verdict,
)
from control_plane.errors import InvalidInput, NotFound, Unauthenticated
from control_plane.events.trail import Actor, record_action
from control_plane.inputs import plain_name
from control_plane.types import Connection, Pool
from ground.contract import AnswerCode, EnrolledAgent, Instant, format_instant
from ground.contract.messages import MAX_AGENT_NAME_LENGTH
from ground.contract.plain_text import shown

__all__ = [
    "CREATED_EVENT",
    "ENROLLED",
    "ENROLLMENT_RESULTS",
    "MAX_LISTED",
    "REFUSED_EVENT",
    "REVOKED_EVENT",
    "USED_EVENT",
    "EnrollmentService",
    "EnrollmentTokenList",
    "EnrollmentTokenView",
    "IssuedEnrollmentToken",
    "TokenStateName",
]

CREATED_EVENT = "enrollment_token.created"
REVOKED_EVENT = "enrollment_token.revoked"
USED_EVENT = "enrollment_token.used"
REFUSED_EVENT = "enrollment_token.refused"
# What `/metrics` counts each exchange as: an agent enrolled, or the refusal's code.
ENROLLED = "enrolled"
ENROLLMENT_RESULTS = (
    ENROLLED,
    AnswerCode.ENROLLMENT_TOKEN_REFUSED.value,
    AnswerCode.ENROLLMENT_TOKEN_EXPIRED.value,
    AnswerCode.ENROLLMENT_TOKEN_USED_UP.value,
    AnswerCode.AGENT_NAME_NOT_ALLOWED.value,
    AnswerCode.AGENT_EXISTS.value,
)
_COUNT = "UPDATE enrollment_counts SET n = n + 1 WHERE result = %s"
# A list shows at most this many tokens, newest first: tokens accumulate, a page must not.
MAX_LISTED = 200

TokenStateName = Literal["active", "used_up", "expired", "revoked"]

_SELECT = (
    "SELECT id, org_id, label, name_pattern, uses_allowed, uses, created_at, expires_at,"
    " created_by_kind, created_by_name, revoked_at, revoked_by_name, last_used_at"
    " FROM enrollment_tokens"
)
# The same line for an unknown and a revoked token (see the module's docstring).
_NOT_KNOWN = (
    "the enrollment token is not known (or was revoked): ask whoever gave it to you for a new one"
)


@dataclass(frozen=True, kw_only=True)
class EnrollmentTokenView:
    """A token as listed: never its secret (only its sha256 is stored)."""

    id: UUID
    org_id: UUID
    label: str | None
    name_pattern: str | None
    uses_allowed: int
    uses: int
    uses_left: int
    state: TokenStateName
    created_at: Instant
    expires_at: Instant
    created_by: str | None
    last_used_at: Instant | None
    revoked_at: Instant | None
    revoked_by: str | None


@dataclass(frozen=True, kw_only=True)
class EnrollmentTokenList:
    tokens: tuple[EnrollmentTokenView, ...]  # newest first, at most MAX_LISTED


@dataclass(frozen=True, kw_only=True)
class IssuedEnrollmentToken:
    """A new token and its secret, shown this once."""

    token: EnrollmentTokenView
    secret: str


def _state_name(row: dict[str, Any], now: datetime) -> TokenStateName:
    judged = verdict(_token_state(row), "", now)
    if judged is Verdict.REVOKED:
        return "revoked"
    if judged is Verdict.EXPIRED:
        return "expired"
    if judged is Verdict.USED_UP:
        return "used_up"
    return "active"


def _token_state(row: dict[str, Any], *, with_pattern: bool = False) -> TokenState:
    """The stored row as `verdict` judges it; a listed state leaves the pattern out (it is about
    the token, not about a name)."""
    return TokenState(
        uses=row["uses"],
        uses_allowed=row["uses_allowed"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
        name_pattern=row["name_pattern"] if with_pattern else None,
    )


def _view(row: dict[str, Any], now: datetime) -> EnrollmentTokenView:
    return EnrollmentTokenView(
        id=row["id"],
        org_id=row["org_id"],
        label=row["label"],
        name_pattern=row["name_pattern"],
        uses_allowed=row["uses_allowed"],
        uses=row["uses"],
        uses_left=row["uses_allowed"] - row["uses"],
        state=_state_name(row, now),
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        created_by=row["created_by_name"],
        last_used_at=row["last_used_at"],
        revoked_at=row["revoked_at"],
        revoked_by=row["revoked_by_name"],
    )


def _token_facts(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "token_id": str(row["id"]),
        "label": row["label"],
        "uses": row["uses"],
        "uses_allowed": row["uses_allowed"],
        "expires_at": format_instant(row["expires_at"]),
        "name_pattern": row["name_pattern"],
    }


def _host_actor(token_id: UUID) -> Actor:
    """Who the trail names for a use: the host that presented the token, known by the token."""
    return Actor(kind="agent", name=f"enrollment-token:{token_id}")


def _refusal(
    code: AnswerCode, row: dict[str, Any] | None, name: str, *, presented: bool
) -> Exception:
    """The host's one line for a refused use (`row`: the token's, None when none is known)."""
    if not presented:
        return Unauthenticated(
            "an enrollment token is required (Authorization: Bearer nwe_…)", code=code.value
        )
    if code is AnswerCode.ENROLLMENT_TOKEN_REFUSED or row is None:
        return Unauthenticated(_NOT_KNOWN, code=AnswerCode.ENROLLMENT_TOKEN_REFUSED.value)
    if code is AnswerCode.ENROLLMENT_TOKEN_EXPIRED:
        return Unauthenticated(
            f"the enrollment token expired at {format_instant(row['expires_at'])}: ask whoever"
            " gave it to you for a new one",
            code=code.value,
        )
    if code is AnswerCode.ENROLLMENT_TOKEN_USED_UP:
        return Unauthenticated(
            f"the enrollment token has no use left (all {row['uses_allowed']} were used): ask"
            " whoever gave it to you for a new one",
            code=code.value,
        )
    if code is AnswerCode.AGENT_NAME_NOT_ALLOWED:
        return InvalidInput(
            "name",
            name,
            f"does not match the token's name pattern {row['name_pattern']!r}"
            " (give a name that does with --name)",
            code=code.value,
        )
    return agent_exists(row["org_id"], name)


class EnrollmentService:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def create(
        self, org_id: UUID, terms: TokenTerms, *, now: datetime, actor: Actor
    ) -> IssuedEnrollmentToken:
        """A new token of `org_id` on `terms`; its secret is shown this once."""
        if actor.kind not in ("user", "operator"):
            raise InvalidInput("actor", actor.kind, "may not make enrollment tokens")
        secret = new_token_secret()
        with self._pool.connection() as conn, conn.transaction():
            require_org(conn, org_id)
            row = conn.execute(
                "INSERT INTO enrollment_tokens (org_id, secret_sha256, label, name_pattern,"
                " uses_allowed, created_at, expires_at, created_by_kind, created_by_id,"
                " created_by_name) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                " RETURNING id, org_id, label, name_pattern, uses_allowed, uses, created_at,"
                " expires_at, created_by_kind, created_by_name, revoked_at, revoked_by_name,"
                " last_used_at",
                [
                    org_id,
                    secret_sha256(secret),
                    terms.label,
                    terms.name_pattern,
                    terms.uses,
                    now,
                    now + terms.expires_in,
                    actor.kind,
                    actor.id,
                    actor.name,
                ],
            ).fetchone()
            assert row is not None
            record_action(
                conn,
                kind=CREATED_EVENT,
                actor=actor,
                at=now,
                org_id=org_id,
                data=_token_facts(row),
            )
        return IssuedEnrollmentToken(token=_view(row, now), secret=secret)

    def list(
        self, *, org_id: UUID | None, now: datetime, active_only: bool = False
    ) -> EnrollmentTokenList:
        """The tokens of `org_id` (every organisation's: None), newest first."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                _SELECT + " WHERE (%(org)s::uuid IS NULL OR org_id = %(org)s)"
                " AND (NOT %(active)s OR (revoked_at IS NULL AND expires_at > %(now)s"
                "      AND uses < uses_allowed))"
                " ORDER BY created_at DESC, id LIMIT %(limit)s",
                {"org": org_id, "active": active_only, "now": now, "limit": MAX_LISTED},
            ).fetchall()
        return EnrollmentTokenList(tokens=tuple(_view(row, now) for row in rows))

    def revoke(
        self, token_id: UUID, *, org_id: UUID | None, now: datetime, actor: Actor
    ) -> EnrollmentTokenView:
        """Refuse the token from now on (`org_id`: only a token of that organisation). Revoking
        it again changes nothing."""
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute(
                "UPDATE enrollment_tokens SET revoked_at = greatest(%(now)s, created_at),"
                " revoked_by_name = %(by)s"
                " WHERE id = %(id)s AND revoked_at IS NULL"
                " AND (%(org)s::uuid IS NULL OR org_id = %(org)s)"
                " RETURNING id, org_id, label, name_pattern, uses_allowed, uses, created_at,"
                " expires_at, created_by_kind, created_by_name, revoked_at, revoked_by_name,"
                " last_used_at",
                {"now": now, "by": actor.name, "id": token_id, "org": org_id},
            ).fetchone()
            if row is None:
                return _view(self._existing(conn, token_id, org_id), now)
            record_action(
                conn,
                kind=REVOKED_EVENT,
                actor=actor,
                at=now,
                org_id=row["org_id"],
                data=_token_facts(row),
            )
        return _view(row, now)

    def _existing(self, conn: Connection, token_id: UUID, org_id: UUID | None) -> dict[str, Any]:
        row = conn.execute(
            _SELECT + " WHERE id = %s AND (%s::uuid IS NULL OR org_id = %s)",
            [token_id, org_id, org_id],
        ).fetchone()
        if row is None:
            raise NotFound(
                f"enrollment token {token_id} does not exist", code="enrollment_token_not_found"
            )
        return dict(row)

    def check_presented(self, secret: str | None) -> None:
        """Raise the exchange's 401 unless `secret` is a token that exists and is not revoked:
        what a request must hold before its malformed body is described to it."""
        found = None
        if secret:
            with self._pool.connection() as conn:
                found = conn.execute(
                    "SELECT 1 FROM enrollment_tokens WHERE secret_sha256 = %s"
                    " AND revoked_at IS NULL",
                    [secret_sha256(secret)],
                ).fetchone()
        if found is None:
            raise Unauthenticated(_NOT_KNOWN, code=AnswerCode.ENROLLMENT_TOKEN_REFUSED.value)

    def enroll(self, secret: str | None, name: object, *, now: datetime) -> EnrolledAgent:
        """Exchange the token `secret` for a new agent called `name` (see the module's
        docstring). Refused: 401 unknown or revoked, expired, used up; 422 a name against the
        pattern; 409 a name the organisation already has. Every exchange is counted by its
        result (`enrollment_counts`, for `/metrics`)."""
        row: dict[str, Any] | None = None
        # The name as the trail and a refusal give it until it is judged: a name that is not
        # plain text is written with U+FFFD for each control.
        clean = shown(name.strip()) if isinstance(name, str) else ""
        with self._pool.connection() as conn:
            try:
                with conn.transaction():
                    if secret:
                        row = conn.execute(
                            _SELECT + " WHERE secret_sha256 = %s FOR UPDATE",
                            [secret_sha256(secret)],
                        ).fetchone()
                    # An unknown token is answered as a revoked one.
                    judged = (
                        Verdict.REVOKED
                        if row is None
                        else token_refusal(_token_state(row, with_pattern=True), now)
                    )
                    if judged is None:
                        assert row is not None
                        # The name is judged only for a token that could be used: the
                        # credential before the body (its 422 changes nothing, counts nothing).
                        clean = plain_name("name", name, MAX_AGENT_NAME_LENGTH)
                        judged = verdict(_token_state(row, with_pattern=True), clean, now)
                    if judged is Verdict.ALLOWED:
                        assert row is not None
                        return self._use(conn, row, clean, now)
                refused = judged.value
            except psycopg.errors.UniqueViolation:
                refused = AnswerCode.AGENT_EXISTS
            assert refused is not None
            with conn.transaction():
                conn.execute(_COUNT, [refused.value])
                if row is not None:
                    record_action(
                        conn,
                        kind=REFUSED_EVENT,
                        actor=_host_actor(row["id"]),
                        at=now,
                        org_id=row["org_id"],
                        data={**_token_facts(row), "reason": refused.value, "name": clean},
                    )
        raise _refusal(refused, row, clean, presented=bool(secret))

    def _use(
        self, conn: Connection, row: dict[str, Any], name: str, now: datetime
    ) -> EnrolledAgent:
        actor = _host_actor(row["id"])
        issued = add_agent(conn, row["org_id"], name, now=now, actor=actor)
        conn.execute(_COUNT, [ENROLLED])
        spent = conn.execute(
            "UPDATE enrollment_tokens SET uses = uses + 1, last_used_at = %s WHERE id = %s"
            " RETURNING id, org_id, label, name_pattern, uses_allowed, uses, created_at,"
            " expires_at, created_by_kind, created_by_name, revoked_at, revoked_by_name,"
            " last_used_at",
            [now, row["id"]],
        ).fetchone()
        assert spent is not None
        record_action(
            conn,
            kind=USED_EVENT,
            actor=actor,
            at=now,
            org_id=row["org_id"],
            data={**_token_facts(spent), "agent_id": str(issued.agent_id), "name": name},
        )
        return EnrolledAgent(
            agent_id=issued.agent_id,
            org_id=issued.org_id,
            name=issued.name,
            credential=issued.agent_key,
        )
