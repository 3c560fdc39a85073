"""Named people of an organisation who sign in to the panel as themselves: all their SQL.

An editor invites a person (a name, an e-mail address and a role); the invitation's link carries
a token shown once, stored as its sha256, good for seven days and for one use. The person sets a
password through it, and at their first sign-in sets up TOTP (the secret shown once). Signing in
is two steps: the address and password open a *pending* session, a TOTP code (or the
organisation's own OpenID Connect provider, `oidc`) verifies it. A code is never accepted twice:
the last step accepted is stored and only a later one passes. Failed attempts, of either step,
lock sign-in with that address for a while (`LOCK_AFTER`, `LOCKED_FOR`), whatever the password.

An address is matched by one rule, everywhere (`address_key`): trimmed, its ASCII letters A-Z
folded to a-z, every other character as typed. The same rule matches an address typed at sign-in
(or a provider's verified address) to a person, keeps one live person per address (the unique
index on `ADDRESS_KEY_SQL`) and names the address's lock. PostgreSQL's own `lower()` follows the
database's collation (under a UTF-8 one it folds U+0130 onto `i`, where Python's `str.lower` gives
`i` and U+0307), so it is asked only under the "C" collation, which folds A-Z and nothing else:
a spelling that reaches a person is always counted with their address.

The lock is kept per address as typed, not per person (`sign_in_failures`, by the sha256 of the
address's `address_key`): an address nobody was invited with is counted and locked exactly as
a person's, with the same answers, so trying an address tells nobody whether it has an account.
Every attempt for one address takes that address's row first, so attempts made at the same moment
are counted one after the other and never more than `LOCK_AFTER` are weighed before the lock.

An editor also changes a person's role, issues a new invitation link (the old one dies) or a
password reset link, and removes a person; an operator removes another operator. An organisation
is never left without an editor: the last live editor can be neither made a viewer nor removed
(the organisation's editors are locked while it is decided, so two editors demoting each other at
once cannot both succeed). A reset ends the person's sessions and their password at once and
issues a link like an invitation's; their TOTP stays as it was, so the link alone signs nobody
in: the person still needs their authenticator (a lost authenticator is a new invitation's case:
remove and invite again).

Every change is on the trail (`person.invited`, `person.role_changed`,
`person.invitation_reissued`, `person.password_reset`, `person.removed`), naming who made it; the
trail names a person by the name they were invited with.
"""

from __future__ import annotations

import re
import secrets
import string
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal
from uuid import UUID

import psycopg

from control_plane.accounts.credentials import secret_sha256
from control_plane.accounts.passwords import (
    MAX_PASSWORD,
    MIN_PASSWORD,
    hash_password,
    new_totp_secret,
    password_matches,
    totp_step_of,
)
from control_plane.accounts.sessions import (
    ABSOLUTE_LIFETIME,
    IDLE_LIMIT,
    MAX_SESSION_SECRET,
    OpenedSession,
    end_session,
    find_live_session,
)
from control_plane.errors import Conflict, InvalidInput
from control_plane.events.trail import Actor, record_action
from control_plane.inputs import plain_name, stored_text
from control_plane.types import Connection, Pool
from ground.contract.plain_text import first_bidi_control, first_control_character

__all__ = [
    "ADDRESS_KEY_SQL",
    "FAILURES_FORGOTTEN_AFTER",
    "INVITATION_LIFETIME",
    "LOCKED_FOR",
    "LOCK_AFTER",
    "ROLES",
    "InvitationRefused",
    "IssuedInvitation",
    "LastEditor",
    "PendingSignIn",
    "PeopleService",
    "PersonSession",
    "PersonView",
    "SignInRefused",
    "address_key",
]

Role = Literal["viewer", "editor", "operator"]
# The roles in an organisation; an operator (no organisation) has the role `operator`.
ROLES: tuple[Role, ...] = ("viewer", "editor")
INVITATION_LIFETIME = timedelta(days=7)
# Five wrong passwords or codes in a row lock sign-in with that address for fifteen minutes: a
# guesser gets twenty tries an hour, a person who mistyped waits a coffee.
LOCK_AFTER = 5
LOCKED_FOR = timedelta(minutes=15)
# An address not tried for a day is forgotten: its failures count from nought again, and
# retention removes its row.
FAILURES_FORGOTTEN_AFTER = timedelta(days=1)
# The pending step (password given, code not yet) lasts ten minutes.
PENDING_LIFETIME = timedelta(minutes=10)
MAX_NAME = 200
MAX_EMAIL = 320
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+")
_SELECT_PERSON = (
    "SELECT p.id, p.org_id, p.name, p.email, p.role, p.created_at, p.password_hash,"
    " p.totp_confirmed"
)


class InvitationRefused(Exception):
    """An invitation link that cannot be used: `reason` is unknown, used or expired."""

    def __init__(self, reason: Literal["unknown", "used", "expired"]) -> None:
        super().__init__(reason)
        self.reason = reason


class LastEditor(Conflict):
    """The change would leave the organisation without an editor."""

    def __init__(self, person_id: UUID) -> None:
        super().__init__(
            "person: the organisation's last editor cannot be made a viewer or removed"
            " (make another person an editor first)",
            code="last_editor",
            field="person",
            value=str(person_id),
        )


class SignInRefused(Exception):
    """A sign-in step refused: `reason` is wrong (password or code), reused (a code already
    accepted), locked (too many failures) or expired (the pending step is over)."""

    def __init__(self, reason: Literal["wrong", "reused", "locked", "expired"]) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, kw_only=True)
class PersonView:
    id: UUID
    org_id: UUID | None  # None for an operator
    name: str
    email: str
    role: Role
    created_at: datetime
    # Invited and not yet through the link: no password yet.
    invited: bool
    totp_set_up: bool


@dataclass(frozen=True, kw_only=True)
class IssuedInvitation:
    """A new invitation and its token, shown this once (the link is made from it)."""

    person: PersonView
    token: str
    expires_at: datetime


@dataclass(frozen=True, kw_only=True)
class PendingSignIn:
    """The password was right: `secret` (a cookie) carries the person to the second step.
    `totp_secret` is set when the person has no TOTP yet: shown this once, to set it up."""

    secret: str
    person: PersonView
    totp_secret: str | None


@dataclass(frozen=True, kw_only=True)
class PersonSession:
    """A live, verified session of a named person."""

    person_id: UUID
    org_id: UUID | None  # None for an operator
    name: str
    role: Role
    expires_at: datetime


def _person(row: dict[str, Any]) -> PersonView:
    return PersonView(
        id=row["id"],
        org_id=row["org_id"],
        name=row["name"],
        email=row["email"],
        role=row["role"],
        created_at=row["created_at"],
        invited=row["password_hash"] is None,
        totp_set_up=row["totp_confirmed"],
    )


def checked_person(
    name: object, email: object, role: object, *, operator: bool = False
) -> tuple[str, str, Role]:
    """The name, address and role of an invitation, or a refusal naming the field. An operator's
    role is `operator`, whatever was asked."""
    clean_name = plain_name("name", name, MAX_NAME)
    if not isinstance(email, str) or _EMAIL.fullmatch(email.strip()) is None:
        raise InvalidInput("email", email, "must be an e-mail address (name@example.com)")
    stored_text("email", email, MAX_EMAIL)
    control = first_control_character(email.strip())
    bidi = first_bidi_control(email)
    if control is not None or bidi is not None:
        # Shown on the panel and typed to sign in: it would read as another person's address.
        named = (
            f"the control character U+{ord(control):04X}"
            if control is not None
            else f"the bidirectional control U+{ord(bidi or ' '):04X}"
        )
        raise InvalidInput(
            "email",
            email[:40],
            f"contains {named} (expected an e-mail address, name@example.com)",
        )
    if operator:
        return clean_name, email.strip(), "operator"
    if role not in ROLES:
        raise InvalidInput("role", role, "must be viewer or editor")
    return clean_name, email.strip(), role


def checked_password(password: object) -> str:
    if not isinstance(password, str) or not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise InvalidInput(
            "password",
            "(hidden)",
            f"must be from {MIN_PASSWORD} to {MAX_PASSWORD} characters long",
        )
    stored_text("password", password, MAX_PASSWORD)
    return password


class PeopleService:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    # Inviting

    def invite(
        self,
        org_id: UUID | None,
        *,
        name: object,
        email: object,
        role: object,
        now: datetime,
        actor: Actor,
    ) -> IssuedInvitation:
        """A person of `org_id` with `role`; with no organisation, an operator."""
        clean_name, clean_email, clean_role = checked_person(
            name, email, role, operator=org_id is None
        )
        token = secrets.token_urlsafe(32)
        expires_at = now + INVITATION_LIFETIME
        with self._pool.connection() as conn:
            try:
                with conn.transaction():
                    row = conn.execute(
                        "INSERT INTO people (org_id, name, email, role, created_at, invited_by)"
                        " VALUES (%s, %s, %s, %s, %s, %s) RETURNING id, org_id, name, email,"
                        " role, created_at, password_hash, totp_confirmed",
                        [org_id, clean_name, clean_email, clean_role, now, actor.name],
                    ).fetchone()
                    assert row is not None
                    conn.execute(
                        "INSERT INTO invitations (token_sha256, person_id, created_at, expires_at)"
                        " VALUES (%s, %s, %s, %s)",
                        [secret_sha256(token), row["id"], now, expires_at],
                    )
                    record_action(
                        conn,
                        kind="person.invited",
                        actor=actor,
                        at=now,
                        org_id=org_id,
                        data={"person_id": str(row["id"]), "name": clean_name, "role": clean_role},
                    )
            except psycopg.errors.UniqueViolation as exc:
                raise Conflict(
                    f"email: {clean_email!r} is already a person who signs in",
                    code="person_exists",
                    field="email",
                    value=clean_email,
                ) from exc
        return IssuedInvitation(person=_person(row), token=token, expires_at=expires_at)

    def people(self, org_id: UUID | None) -> tuple[PersonView, ...]:
        """The people of `org_id`; with no organisation, the operators."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                _SELECT_PERSON + " FROM people p"
                " WHERE p.org_id IS NOT DISTINCT FROM %s AND p.removed_at IS NULL"
                " ORDER BY p.created_at, p.id",
                [org_id],
            ).fetchall()
        return tuple(_person(row) for row in rows)

    def remove(self, org_id: UUID | None, person_id: UUID, *, now: datetime, actor: Actor) -> bool:
        """The person signs in no more, from their next request on (their sessions end, their
        invitation too); the trail keeps their name. With no organisation, an operator. False
        when no such live person is in `org_id`; LastEditor for the organisation's last."""
        with self._pool.connection() as conn, conn.transaction():
            editors = _locked_editors(conn, org_id)
            person = _live_person(conn, org_id, person_id)
            if person is None:
                return False
            if editors == {person_id}:
                raise LastEditor(person_id)
            row = conn.execute(
                "UPDATE people SET removed_at = %s WHERE id = %s RETURNING name",
                [now, person_id],
            ).fetchone()
            assert row is not None
            conn.execute("DELETE FROM person_sessions WHERE person_id = %s", [person_id])
            record_action(
                conn,
                kind="person.removed",
                actor=actor,
                at=now,
                org_id=org_id,
                data={"person_id": str(person_id), "name": row["name"]},
            )
        return True

    def change_role(
        self, org_id: UUID, person_id: UUID, role: object, *, now: datetime, actor: Actor
    ) -> PersonView | None:
        """The person's new role, from their next request on; None when no such live person
        is in `org_id`; LastEditor when it would leave the organisation without an editor."""
        if role not in ROLES:
            raise InvalidInput("role", role, "must be viewer or editor")
        with self._pool.connection() as conn, conn.transaction():
            editors = _locked_editors(conn, org_id)
            person = _live_person(conn, org_id, person_id)
            if person is None:
                return None
            if person["role"] == role:
                return _person(person)
            if editors == {person_id}:
                raise LastEditor(person_id)
            conn.execute("UPDATE people SET role = %s WHERE id = %s", [role, person_id])
            record_action(
                conn,
                kind="person.role_changed",
                actor=actor,
                at=now,
                org_id=org_id,
                data={
                    "person_id": str(person_id),
                    "name": person["name"],
                    "from": person["role"],
                    "to": role,
                },
            )
        return replace(_person(person), role=role)

    def reissue(
        self,
        org_id: UUID | None,
        person_id: UUID,
        *,
        reset: bool,
        now: datetime,
        actor: Actor,
    ) -> IssuedInvitation | None:
        """A new link for the person, shown this once; every earlier unused link of theirs
        dies. `reset`: also their password and sessions end now (their TOTP is kept). None when
        no such live person is in `org_id`; without `reset`, Conflict for a person who has set
        a password already (they need a reset, not an invitation)."""
        token = secrets.token_urlsafe(32)
        expires_at = now + INVITATION_LIFETIME
        with self._pool.connection() as conn, conn.transaction():
            if reset:
                # The address's row before the person's, in the order a sign-in takes them.
                _forget_failures_of(conn, org_id, person_id)
            person = _live_person(conn, org_id, person_id)
            if person is None:
                return None
            if not reset and person["password_hash"] is not None:
                raise Conflict(
                    "person: has set a password already (issue a password reset instead)",
                    code="not_invited",
                    field="person",
                    value=str(person_id),
                )
            conn.execute(
                "DELETE FROM invitations WHERE person_id = %s AND used_at IS NULL", [person_id]
            )
            if reset:
                conn.execute("UPDATE people SET password_hash = NULL WHERE id = %s", [person_id])
                conn.execute("DELETE FROM person_sessions WHERE person_id = %s", [person_id])
            conn.execute(
                "INSERT INTO invitations (token_sha256, person_id, created_at, expires_at)"
                " VALUES (%s, %s, %s, %s)",
                [secret_sha256(token), person_id, now, expires_at],
            )
            record_action(
                conn,
                kind="person.password_reset" if reset else "person.invitation_reissued",
                actor=actor,
                at=now,
                org_id=org_id,
                data={"person_id": str(person_id), "name": person["name"]},
            )
        issued = replace(_person(person), invited=True) if reset else _person(person)
        return IssuedInvitation(person=issued, token=token, expires_at=expires_at)

    def invitation(self, token: str, *, now: datetime) -> PersonView:
        """The person an invitation link is for, while it may be used."""
        with self._pool.connection() as conn:
            return _person(self._open_invitation(conn, token, now))

    def _open_invitation(self, conn: Connection, token: str, now: datetime) -> dict[str, Any]:
        if not token or len(token) > MAX_SESSION_SECRET:
            raise InvitationRefused("unknown")
        row = conn.execute(
            _SELECT_PERSON + ", i.used_at, i.expires_at FROM invitations i"
            " JOIN people p ON p.id = i.person_id"
            " WHERE i.token_sha256 = %s AND p.removed_at IS NULL",
            [secret_sha256(token)],
        ).fetchone()
        if row is None:
            raise InvitationRefused("unknown")
        if row["used_at"] is not None:
            raise InvitationRefused("used")
        if row["expires_at"] <= now:
            raise InvitationRefused("expired")
        return dict(row)

    def accept(self, token: str, password: object, *, now: datetime) -> PersonView:
        """Use the invitation: the person's password is set, and the link is spent. Two uses at
        once: the row's update decides, the second is refused as used."""
        clean = checked_password(password)
        with self._pool.connection() as conn, conn.transaction():
            row = self._open_invitation(conn, token, now)
            spent = conn.execute(
                "UPDATE invitations SET used_at = %s WHERE token_sha256 = %s AND used_at IS NULL",
                [now, secret_sha256(token)],
            ).rowcount
            if spent != 1:
                raise InvitationRefused("used")
            conn.execute(
                "UPDATE people SET password_hash = %s WHERE id = %s",
                [hash_password(clean), row["id"]],
            )
        return replace(_person(row), invited=False)

    # Signing in

    def sign_in(self, email: str, password: str, *, now: datetime) -> PendingSignIn:
        """The first step: address and password. A person without TOTP gets a new secret.
        A failure is committed before it is raised: it counts towards the lock of the address,
        whether or not it is a person's, and the answers are the same either way."""
        address = address_sha256(email)
        refusal: SignInRefused | None = None
        with self._pool.connection() as conn, conn.transaction():
            locked = _attempt(conn, address, now)
            row = None
            if not locked and "\x00" not in email:
                # No address holds a NUL (an invitation refuses one), and PostgreSQL cannot
                # compare one: such an address is nobody's, answered as any unknown one.
                row = conn.execute(
                    _SELECT_PERSON + " FROM people p"
                    f" WHERE {ADDRESS_KEY_SQL} = %s AND p.removed_at IS NULL FOR UPDATE",
                    [address_key(email)],
                ).fetchone()
            if locked:
                refusal = SignInRefused("locked")
            elif not password_matches(None if row is None else row["password_hash"], password):
                _failed(conn, address, now)
                refusal = SignInRefused("wrong")
            else:
                assert row is not None
                totp_secret = None
                if not row["totp_confirmed"]:
                    # A new secret each time it is shown: a secret is on one page only, once.
                    totp_secret = new_totp_secret()
                    conn.execute(
                        "UPDATE people SET totp_secret = %s WHERE id = %s",
                        [totp_secret, row["id"]],
                    )
                secret = _open(conn, row["id"], now, verified=False)
        if refusal is not None:
            raise refusal
        assert row is not None
        return PendingSignIn(secret=secret, person=_person(row), totp_secret=totp_secret)

    def pending(self, secret: str | None, *, now: datetime) -> PersonView | None:
        """The person a pending sign-in is for, while it lasts."""
        if not secret or len(secret) > MAX_SESSION_SECRET:
            return None
        with self._pool.connection() as conn:
            row = conn.execute(
                _SELECT_PERSON + " FROM person_sessions s JOIN people p"
                " ON p.id = s.person_id WHERE s.secret_sha256 = %s AND s.verified_at IS NULL"
                " AND s.expires_at > %s AND p.removed_at IS NULL",
                [secret_sha256(secret), now],
            ).fetchone()
        return None if row is None else _person(row)

    def verify_code(self, pending_secret: str | None, code: str, *, now: datetime) -> OpenedSession:
        """The second step: a TOTP code of a step later than the last accepted. The pending
        session becomes the person's session (a new secret: the pending one is spent). A failure
        is committed before it is raised: it counts towards the lock."""
        if not pending_secret or len(pending_secret) > MAX_SESSION_SECRET:
            raise SignInRefused("expired")
        digest = secret_sha256(pending_secret)
        refusal: SignInRefused | None = None
        with self._pool.connection() as conn, conn.transaction():
            # The address's row first, then the person's: the order the first step takes them.
            person = conn.execute(
                "SELECT p.email FROM person_sessions s JOIN people p ON p.id = s.person_id"
                " WHERE s.secret_sha256 = %s AND s.verified_at IS NULL AND s.expires_at > %s"
                " AND p.removed_at IS NULL",
                [digest, now],
            ).fetchone()
            address = None if person is None else address_sha256(person["email"])
            locked = address is not None and _attempt(conn, address, now)
            row = conn.execute(
                "SELECT p.id, p.totp_secret, p.totp_last_step"
                " FROM person_sessions s JOIN people p ON p.id = s.person_id"
                " WHERE s.secret_sha256 = %s AND s.verified_at IS NULL AND s.expires_at > %s"
                " AND p.removed_at IS NULL FOR UPDATE OF p",
                [digest, now],
            ).fetchone()
            if address is None or row is None or row["totp_secret"] is None:
                refusal = SignInRefused("expired")
            elif locked:
                refusal = SignInRefused("locked")
            else:
                step = totp_step_of(row["totp_secret"], code, now)
                last = row["totp_last_step"]
                if step is None or (last is not None and step <= last):
                    _failed(conn, address, now)
                    refusal = SignInRefused("wrong" if step is None else "reused")
                else:
                    conn.execute(
                        "UPDATE people SET totp_last_step = %s, totp_confirmed = true"
                        " WHERE id = %s",
                        [step, row["id"]],
                    )
                    # Signed in: the address's failures count from nought again.
                    conn.execute(
                        "DELETE FROM sign_in_failures WHERE address_sha256 = %s", [address]
                    )
                    conn.execute("DELETE FROM person_sessions WHERE secret_sha256 = %s", [digest])
                    secret = _open(conn, row["id"], now, verified=True)
        if refusal is not None:
            raise refusal
        return OpenedSession(secret=secret, expires_at=now + ABSOLUTE_LIFETIME)

    def open_verified(self, person_id: UUID, *, now: datetime) -> OpenedSession:
        """A session for a person the organisation's own provider vouched for."""
        with self._pool.connection() as conn, conn.transaction():
            secret = _open(conn, person_id, now, verified=True)
        return OpenedSession(secret=secret, expires_at=now + ABSOLUTE_LIFETIME)

    def find(self, secret: str | None, *, now: datetime) -> PersonSession | None:
        """The live, verified session behind `secret`, or None."""
        row = find_live_session(
            self._pool,
            "person_sessions",
            "SELECT s.person_id, s.last_seen_at, s.expires_at, p.org_id, p.name, p.role"
            " FROM person_sessions s JOIN people p ON p.id = s.person_id"
            " WHERE s.secret_sha256 = %s AND s.verified_at IS NOT NULL"
            " AND p.removed_at IS NULL AND s.expires_at > %s AND s.last_seen_at > %s",
            secret,
            now,
        )
        if row is None:
            return None
        return PersonSession(
            person_id=row["person_id"],
            org_id=row["org_id"],
            name=row["name"],
            role=row["role"],
            expires_at=row["expires_at"],
        )

    def close(self, secret: str | None) -> None:
        end_session(self._pool, "person_sessions", secret)

    def person_by_claims(
        self, org_id: UUID, *, subject: str, email: str | None
    ) -> PersonView | None:
        """The invited person a provider's verified claims name: by the subject remembered from
        an earlier sign-in, else by the verified address (and the subject is then remembered).
        A claim holding a NUL names nobody: no subject or address on record can hold one, and
        PostgreSQL could not compare it."""
        if "\x00" in subject or (email is not None and "\x00" in email):
            return None
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute(
                _SELECT_PERSON + " FROM people p WHERE p.org_id = %s"
                " AND p.oidc_subject = %s AND p.removed_at IS NULL",
                [org_id, subject],
            ).fetchone()
            if row is None and email:
                row = conn.execute(
                    _SELECT_PERSON + " FROM people p WHERE p.org_id = %s"
                    f" AND {ADDRESS_KEY_SQL} = %s AND p.oidc_subject IS NULL"
                    " AND p.removed_at IS NULL",
                    [org_id, address_key(email)],
                ).fetchone()
                if row is not None:
                    conn.execute(
                        "UPDATE people SET oidc_subject = %s WHERE id = %s", [subject, row["id"]]
                    )
        return None if row is None else _person(row)


def _live_person(conn: Connection, org_id: UUID | None, person_id: UUID) -> dict[str, Any] | None:
    row = conn.execute(
        _SELECT_PERSON + " FROM people p WHERE p.id = %s"
        " AND p.org_id IS NOT DISTINCT FROM %s AND p.removed_at IS NULL FOR UPDATE",
        [person_id, org_id],
    ).fetchone()
    return None if row is None else dict(row)


def _locked_editors(conn: Connection, org_id: UUID | None) -> set[UUID]:
    """The organisation's live editors, locked until the transaction ends (first, and in one
    order, so two concurrent demotions are decided one after the other, never deadlocked)."""
    rows = conn.execute(
        "SELECT id FROM people WHERE org_id = %s AND role = 'editor' AND removed_at IS NULL"
        " ORDER BY id FOR UPDATE",
        [org_id],
    ).fetchall()
    return {row["id"] for row in rows}


# A-Z to a-z and nothing else: the rule PostgreSQL's `lower()` follows under the "C" collation.
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
# The stored address's key in SQL (the people's unique index is on it), whatever the database's
# collation; compared with `address_key` of the address given.
ADDRESS_KEY_SQL = 'lower(p.email COLLATE "C")'


def address_key(email: str) -> str:
    """An address as people are matched by it (see the module): trimmed, A-Z folded to a-z."""
    return email.strip().translate(_ASCII_LOWER)


def address_sha256(email: str) -> str:
    """What the lock knows an address by: the sha256 of its `address_key`, so every spelling that
    reaches a person shares the person's lock."""
    return secret_sha256(address_key(email))


def _attempt(conn: Connection, address: str, now: datetime) -> bool:
    """Take the address's row for this attempt (made if it is new: an attempt for the same
    address waits until this one is decided); whether sign-in with it is locked. Failures of an
    address not tried for `FAILURES_FORGOTTEN_AFTER` are forgotten."""
    row = conn.execute(
        "INSERT INTO sign_in_failures AS f (address_sha256, failed_attempts, last_attempt_at)"
        " VALUES (%(address)s, 0, %(now)s)"
        " ON CONFLICT (address_sha256) DO UPDATE SET"
        "  failed_attempts = CASE WHEN f.last_attempt_at <= %(forgotten)s THEN 0"
        "   ELSE f.failed_attempts END,"
        "  last_attempt_at = GREATEST(f.last_attempt_at, %(now)s)"
        " RETURNING f.locked_until",
        {"address": address, "now": now, "forgotten": now - FAILURES_FORGOTTEN_AFTER},
    ).fetchone()
    assert row is not None
    return row["locked_until"] is not None and row["locked_until"] > now


def _failed(conn: Connection, address: str, now: datetime) -> None:
    """One more failure; the one that reaches the limit locks sign-in and starts counting anew."""
    conn.execute(
        "UPDATE sign_in_failures SET"
        " locked_until = CASE WHEN failed_attempts + 1 >= %(limit)s THEN %(until)s"
        "   ELSE locked_until END,"
        " failed_attempts = CASE WHEN failed_attempts + 1 >= %(limit)s THEN 0"
        "   ELSE failed_attempts + 1 END"
        " WHERE address_sha256 = %(address)s",
        {"limit": LOCK_AFTER, "until": now + LOCKED_FOR, "address": address},
    )


def _forget_failures_of(conn: Connection, org_id: UUID | None, person_id: UUID) -> None:
    """The person's address starts counting from nought, its lock lifted (a password reset)."""
    row = conn.execute(
        "SELECT email FROM people WHERE id = %s AND org_id IS NOT DISTINCT FROM %s"
        " AND removed_at IS NULL",
        [person_id, org_id],
    ).fetchone()
    if row is not None:
        conn.execute(
            "DELETE FROM sign_in_failures WHERE address_sha256 = %s",
            [address_sha256(row["email"])],
        )


def _open(conn: Connection, person_id: UUID, now: datetime, *, verified: bool) -> str:
    secret = secrets.token_urlsafe(32)
    # Ended sessions are removed as new ones open, so the table never grows unbounded.
    conn.execute(
        "DELETE FROM person_sessions WHERE expires_at <= %s OR last_seen_at <= %s",
        [now, now - IDLE_LIMIT],
    )
    conn.execute(
        "INSERT INTO person_sessions (secret_sha256, person_id, created_at, last_seen_at,"
        " expires_at, verified_at) VALUES (%s, %s, %s, %s, %s, %s)",
        [
            secret_sha256(secret),
            person_id,
            now,
            now,
            now + (ABSOLUTE_LIFETIME if verified else PENDING_LIFETIME),
            now if verified else None,
        ],
    )
    return secret
