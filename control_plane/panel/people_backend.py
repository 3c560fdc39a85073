"""The panel's door into the named people (`accounts.people`): inviting, listing, changing a
role, a new invitation or password reset link, removing (a person, an operator, the
organisation's own sign-in provider), an invitation's link, the two steps of signing in as
oneself. Like `backend`, it turns the service's
refusals into the panel's errors (`Refused` naming the field) so the pages word them."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from control_plane.accounts.people import (
    InvitationRefused,
    IssuedInvitation,
    LastEditor,
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
    "change_role",
    "invitation",
    "invite",
    "pending",
    "people",
    "reissue",
    "remove",
    "remove_provider",
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
    services: Services, org_id: UUID | None, person_id: UUID, *, actor: Actor, now: datetime
) -> None:
    """With no organisation, an operator. Refused `last_editor` for an organisation's last."""
    try:
        removed = services.people.remove(org_id, person_id, now=now, actor=actor)
    except LastEditor as exc:
        raise Refused("last_editor", str(person_id)) from exc
    if not removed:
        raise Missing(str(person_id))


def change_role(
    services: Services, org_id: UUID, person_id: UUID, role: str, *, actor: Actor, now: datetime
) -> PersonView:
    try:
        changed = services.people.change_role(org_id, person_id, role, now=now, actor=actor)
    except LastEditor as exc:
        raise Refused("last_editor", str(person_id)) from exc
    except InvalidInput as exc:
        raise refused(exc) from exc
    if changed is None:
        raise Missing(str(person_id))
    return changed


def reissue(
    services: Services,
    org_id: UUID | None,
    person_id: UUID,
    *,
    reset: bool,
    actor: Actor,
    now: datetime,
) -> IssuedInvitation:
    """A new invitation link (`reset` False: for a person who has not set a password yet), or a
    password reset link; Refused `not_invited` for an invitation to a person with a password."""
    try:
        issued = services.people.reissue(org_id, person_id, reset=reset, now=now, actor=actor)
    except Conflict as exc:
        raise Refused("not_invited", str(person_id)) from exc
    if issued is None:
        raise Missing(str(person_id))
    return issued


def remove_provider(services: Services, org_id: UUID, *, actor: Actor, now: datetime) -> None:
    if not services.oidc.remove(org_id, now=now, actor=actor):
        raise Missing("oidc")


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
