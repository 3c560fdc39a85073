"""The panel's door into the named people (`accounts.people`): inviting, listing, an
invitation's link, the two steps of signing in as oneself. Like `backend`, it turns the service's
refusals into the panel's errors (`Refused` naming the field) so the pages word them."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from control_plane.accounts.people import (
    InvitationRefused,
    IssuedInvitation,
    PendingSignIn,
    PersonView,
    SignInRefused,
)
from control_plane.accounts.sessions import OpenedSession
from control_plane.errors import Conflict, InvalidInput
from control_plane.events.trail import Actor
from control_plane.panel.backend import Missing, Refused, refused
from control_plane.registry import Services

__all__ = [
    "InvitationRefused",
    "SignInRefused",
    "accept_invitation",
    "invitation",
    "invite",
    "pending",
    "people",
    "remove",
    "sign_in",
    "verify_code",
]


def invite(
    services: Services,
    org_id: UUID | None,
    *,
    name: str,
    email: str,
    role: str,
    actor: Actor,
    now: datetime,
) -> IssuedInvitation:
    try:
        return services.people.invite(
            org_id, name=name, email=email, role=role, now=now, actor=actor
        )
    except InvalidInput as exc:
        raise refused(exc) from exc
    except Conflict as exc:
        raise Refused("email_taken", email) from exc


def remove(
    services: Services, org_id: UUID, person_id: UUID, *, actor: Actor, now: datetime
) -> None:
    if not services.people.remove(org_id, person_id, now=now, actor=actor):
        raise Missing(str(person_id))


def people(services: Services, org_id: UUID | None) -> tuple[PersonView, ...]:
    return services.people.people(org_id)


def invitation(services: Services, token: str, *, now: datetime) -> PersonView:
    return services.people.invitation(token, now=now)


def accept_invitation(
    services: Services, token: str, password: str, *, now: datetime
) -> PersonView:
    try:
        return services.people.accept(token, password, now=now)
    except InvalidInput as exc:
        raise refused(exc) from exc


def sign_in(services: Services, email: str, password: str, *, now: datetime) -> PendingSignIn:
    return services.people.sign_in(email, password, now=now)


def pending(services: Services, secret: str | None, *, now: datetime) -> PersonView | None:
    return services.people.pending(secret, now=now)


def verify_code(
    services: Services, secret: str | None, code: str, *, now: datetime
) -> OpenedSession:
    return services.people.verify_code(secret, code, now=now)
