"""The panel's door into the control plane's domain services: its errors, signing in, the platform.

The pages never call a service directly: they ask this module or one of its three siblings
(`customer_backend`, `operator_backend`, `rollout_backend`), so the panel calls exactly the
services the JSON API calls (no second copy of any rule) and a change in them shows up in these
four files only. The services' typed results go to the pages as they are; what the four add is the
translation of the services' refusals into the panel's two errors, defined here (`Missing`,
`Refused`), so a page words the problem itself; a `Missing` a route does not catch is the
"not found" page (the panel's exception handler, `mount_panel`). This module owns those errors
and their translation, the sessions (signing in and out) and the platform's settings.

Every function that reads or writes at an instant takes `now`: the request's one clock reading
(`request.state.now`, set by the app's ServerTime middleware), passed down by the route.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from control_plane.accounts.credentials import Audience
from control_plane.accounts.services import Principal, actor_of
from control_plane.accounts.sessions import OpenedSession, PanelSession
from control_plane.errors import Conflict, Forbidden, InvalidInput, NotFound, Unauthenticated
from control_plane.events.trail import Actor
from control_plane.registry import Services
from control_plane.settings.services import PlatformSettings

__all__ = [
    "Missing",
    "Refused",
    "authenticate",
    "close_session",
    "find_session",
    "missing_as",
    "missing_or_refused",
    "open_session",
    "platform",
    "refusals_as_panel_errors",
    "session_actor",
    "update_platform",
]


class Missing(Exception):
    """The object does not exist for this caller (another organisation's is missing too)."""


class Refused(Exception):
    """A value the service refused; `field` names it (the panel words the message itself)."""

    def __init__(self, field: str, value: object) -> None:
        super().__init__(field)
        self.field = field
        self.value = value


def refused(exc: InvalidInput) -> Refused:
    """A service's refused value as the panel's error, naming its field."""
    return Refused(str(exc.fields.get("field")), exc.fields.get("value"))


@contextmanager
def refusals_as_panel_errors(subject: str) -> Iterator[None]:
    """Inside it, a service's refusal (missing, a value refused, a state that does not allow
    it) is raised as the panel's error, `subject` naming what it is about (see `domain_error`)."""
    try:
        yield
    except (NotFound, InvalidInput, Conflict) as exc:
        raise domain_error(exc, subject) from exc


@contextmanager
def missing_as(subject: str) -> Iterator[None]:
    """Inside it, a service's "not found" is raised as the panel's `Missing` of `subject`."""
    try:
        yield
    except NotFound as exc:
        raise Missing(subject) from exc


@contextmanager
def missing_or_refused(subject: str) -> Iterator[None]:
    """Inside it, a service's "not found" is raised as the panel's `Missing` of `subject`, and a
    value it refused as `Refused` naming the value's field."""
    try:
        yield
    except (NotFound, InvalidInput) as exc:
        raise domain_error(exc, subject) from exc


def domain_error(exc: Exception, subject: str) -> Exception:
    """A service's refusal as the panel's error: missing, a value refused at its field, or a
    state that does not allow it (the subject is the field)."""
    if isinstance(exc, NotFound):
        return Missing(subject)
    if isinstance(exc, InvalidInput):
        return refused(exc)
    return Refused(subject, None)


# Signing in


def authenticate(services: Services, secret: str) -> Principal | None:
    """Who this key is, when it is a live panel or operator key; None for anything else."""
    for audience in (Audience.PANEL, Audience.OPERATOR):
        try:
            return services.accounts.authenticate(secret, audience)
        except Forbidden:
            continue  # issued to another audience: try the next, refuse an agent's key
        except Unauthenticated:
            return None
    return None


def open_session(services: Services, who: Principal, *, now: datetime) -> OpenedSession:
    return services.sessions.open(who.credential_id, now=now)


def find_session(services: Services, secret: str | None, *, now: datetime) -> PanelSession | None:
    """The session behind the cookie: a key's, or a named person's (one cookie for both)."""
    found = services.sessions.find(secret, now=now)
    if found is not None:
        return found
    person = services.people.find(secret, now=now)
    if person is None:
        return None
    return PanelSession(
        credential_id=None,
        audience=Audience.OPERATOR if person.role == "operator" else Audience.PANEL,
        org_id=person.org_id,
        expires_at=person.expires_at,
        person_id=person.person_id,
        person_name=person.name,
        role=person.role,
    )


def close_session(services: Services, secret: str | None) -> None:
    services.sessions.close(secret)
    services.people.close(secret)


# The platform's settings


def platform(services: Services) -> PlatformSettings:
    return services.settings.get()


def session_actor(session: PanelSession) -> Actor:
    """Who the trail names for a panel action: the person signed in as themselves, by their
    name; else the signed-in credential."""
    if session.audience is Audience.OPERATOR and session.person_id is not None:
        # No id: the brake's `changed_by` names a credential, and an operator person is none.
        return Actor(kind="operator", name=session.person_name)
    if session.person_id is not None:
        return Actor(kind="user", id=session.person_id, name=session.person_name)
    assert session.credential_id is not None  # a session is a person's or a key's
    return actor_of(
        Principal(
            audience=session.audience,
            credential_id=session.credential_id,
            org_id=session.org_id,
        )
    )


def update_platform(
    services: Services, changes: dict[str, Any], *, actor: Actor, now: datetime
) -> PlatformSettings:
    try:
        return services.settings.update(changes, now=now, actor=actor)
    except InvalidInput as exc:
        raise refused(exc) from exc
