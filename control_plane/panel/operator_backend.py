"""The panel's door to the operators' platform-wide reads and actions: the forecast and the nights'
charts, the fleet's versions and the trust root it holds, the releases list and withdrawal, the
panel and operator credentials, and the platform's brake.

One of the four backend modules (see `backend`): it calls the domain services and turns their
refusals into the panel's `Missing` and `Refused`. Every function at an instant takes `now`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from uuid import UUID

from control_plane.accounts.credentials import Audience
from control_plane.accounts.services import (
    CredentialView,
    IssuedCredential,
)
from control_plane.agents.fleet import FleetVersions
from control_plane.brake.services import BrakeChange, BrakeState
from control_plane.claims.services import GrantHistory
from control_plane.errors import Conflict, InvalidInput, NotFound
from control_plane.events.trail import Actor
from control_plane.forecast.model import OrgDayForecast, PlatformDayForecast
from control_plane.forecast.round_bytes import OrgRound
from control_plane.metrics.trust_roots import TrustRootStanding
from control_plane.panel.backend import (
    Missing,
    Refused,
    missing_as,
    refusals_as_panel_errors,
    refused,
)
from control_plane.registry import Services
from control_plane.releases.withdrawal import ReleaseList, WithdrawnRelease
from control_plane.rollout.services import RolloutOverview
from control_plane.runs.services import NightOutcomes
from control_plane.trust_roots.services import UnverifiableNow

__all__ = [
    "brake",
    "credential",
    "credentials",
    "fleet_versions",
    "grants_per_round",
    "issue_credential",
    "nights_with_rollout",
    "org_forecast",
    "org_next_round",
    "outcomes_per_slot",
    "releases",
    "revoke_credential",
    "rotate_credential",
    "set_brake",
    "trust_root",
    "unverifiable_releases",
    "withdraw_release",
]


# The forecast and the nights


def org_forecast(services: Services, org_id: UUID, day: date) -> OrgDayForecast:
    return services.forecast.org_day(day, org_id=org_id)


def org_next_round(services: Services, org_id: UUID, now: datetime) -> OrgRound | None:
    """The organisation's next round of updates and its bytes; None when no agent waits."""
    return services.forecast.next_rounds(now=now, org_id=org_id).get(org_id)


def nights_with_rollout(
    services: Services, days: Sequence[date], *, now: datetime
) -> tuple[tuple[PlatformDayForecast, ...], RolloutOverview]:
    return services.forecast.nights_with_rollout(days, now=now)


def grants_per_round(services: Services, *, since: datetime, until: datetime) -> GrantHistory:
    return services.claims.grants_per_round(since=since, until=until)


def outcomes_per_slot(services: Services, *, since: datetime, until: datetime) -> NightOutcomes:
    return services.runs.outcomes_per_slot(since=since, until=until)


# The fleet


def fleet_versions(services: Services) -> FleetVersions:
    """Live agents per (channel, platform, version), in one query."""
    return services.fleet.versions()


def trust_root(services: Services) -> TrustRootStanding:
    """The newest published trust root and how many live agents hold it, an older one or none."""
    return services.metrics.trust_root_standing()


def unverifiable_releases(services: Services) -> UnverifiableNow:
    """The live releases the newest trust root leaves unverifiable, with what to do."""
    return services.trust_roots.unverifiable_now()


# Releases


def releases(services: Services) -> ReleaseList:
    return services.releases.list()


def withdraw_release(
    services: Services, release_id: UUID, *, reason: str, actor: Actor, now: datetime
) -> WithdrawnRelease:
    try:
        return services.releases.withdraw(release_id, reason=reason, now=now, actor=actor)
    except NotFound as exc:
        raise Missing(str(release_id)) from exc
    except InvalidInput as exc:
        raise refused(exc) from exc
    except Conflict as exc:
        raise Refused("release", str(release_id)) from exc


# Credentials


def credentials(services: Services, *, include_revoked: bool) -> tuple[CredentialView, ...]:
    """The panel and operator keys (an agent's key is its agent's business: rotated there)."""
    # Asked per audience: the agents' keys (one per agent, tens of thousands) are never read.
    listed: list[CredentialView] = []
    for audience in (Audience.OPERATOR, Audience.PANEL):
        listed.extend(
            services.accounts.list_credentials(
                audience=audience, include_revoked=include_revoked
            ).credentials
        )
    return tuple(sorted(listed, key=lambda c: (c.created_at, str(c.id))))


def credential(services: Services, credential_id: UUID) -> CredentialView:
    for found in credentials(services, include_revoked=True):
        if found.id == credential_id:
            return found
    raise Missing(str(credential_id))


def issue_credential(
    services: Services,
    *,
    audience: Audience,
    name: str,
    org_id: UUID | None,
    actor: Actor,
    now: datetime,
) -> IssuedCredential:
    try:
        return services.accounts.issue(audience, name=name, org_id=org_id, now=now, actor=actor)
    except NotFound as exc:
        raise Refused("org_id", str(org_id)) from exc
    except InvalidInput as exc:
        raise refused(exc) from exc


def rotate_credential(
    services: Services, credential_id: UUID, *, actor: Actor, now: datetime
) -> IssuedCredential:
    credential(services, credential_id)  # an agent's key, or none, is missing here
    try:
        return services.accounts.rotate(credential_id, now=now, actor=actor)
    except NotFound as exc:
        raise Missing(str(credential_id)) from exc
    except Conflict as exc:
        raise Refused("credential", str(credential_id)) from exc


def revoke_credential(
    services: Services, credential_id: UUID, *, actor: Actor, now: datetime
) -> CredentialView:
    credential(services, credential_id)
    with missing_as(str(credential_id)):
        return services.accounts.revoke(credential_id, now=now, actor=actor)


# The brake


def brake(services: Services) -> BrakeState:
    return services.brake.get()


def set_brake(
    services: Services, *, engaged: bool, reason: str | None, actor: Actor, now: datetime
) -> BrakeChange:
    # The panel's brake also revokes the tokens already granted: an operator who pulls it in an
    # emergency means "stop", not "stop after the ones already downloading".
    with refusals_as_panel_errors("reason"):
        return services.brake.set(
            engaged=engaged, reason=reason, revoke_outstanding=True, actor=actor, now=now
        )
