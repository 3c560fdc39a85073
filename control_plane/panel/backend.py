"""The panel's one door into the control plane's domain services.

Every page asks this module, never a service directly, so the panel calls exactly the services
the JSON API calls (no second copy of any rule) and a change in them shows up in this one file.
The services' typed results go to the pages as they are; what this module adds is the translation
of their refusals into the panel's two errors, so a page words the problem itself.

Every function that reads or writes at an instant takes `now`: the request's one clock reading
(`request.state.now`, set by the app's ServerTime middleware), passed down by the route.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from uuid import UUID

from control_plane.accounts.credentials import Audience
from control_plane.accounts.services import (
    CredentialView,
    IssuedCredential,
    OpenedSession,
    PanelSession,
    Principal,
    actor_of,
)
from control_plane.agents.services import AgentOverview, AgentPage
from control_plane.brake.services import BrakeChange, BrakeState
from control_plane.claims.services import GrantHistory
from control_plane.errors import Conflict, Forbidden, InvalidInput, NotFound, Unauthenticated
from control_plane.events.services import EventFilter, EventView
from control_plane.events.trail import Actor
from control_plane.forecast.model import OrgDayForecast, PlatformDayForecast
from control_plane.notifications.services import NotificationPage, WebhookView
from control_plane.notifications.test_delivery import TEST_EVENT
from control_plane.registry import Services
from control_plane.releases.withdrawal import ReleaseList, WithdrawnRelease
from control_plane.runs.services import NightOutcomes, RecordedRun
from control_plane.runs.views import RunView
from control_plane.settings.services import PlatformSettings

__all__ = [
    "AgentDetail",
    "ManualRun",
    "Missing",
    "Refused",
    "WebhookTest",
    "agent_detail",
    "authenticate",
    "brake",
    "close_session",
    "credential",
    "credentials",
    "delete_webhook",
    "find_session",
    "fleet_versions",
    "grants_per_round",
    "issue_credential",
    "last_webhook_test",
    "list_agents",
    "manual_run",
    "mark_notification",
    "notifications",
    "open_session",
    "org_forecast",
    "outcomes_per_slot",
    "platform",
    "platform_forecast",
    "releases",
    "request_update",
    "revoke_credential",
    "rotate_credential",
    "save_schedule",
    "save_webhook",
    "send_webhook_test",
    "session_actor",
    "set_brake",
    "update_platform",
    "webhook",
    "withdraw_release",
]

# The timeline shows this many of the agent's newest events.
TIMELINE_EVENTS = 50
# The inbox shows this many of the newest notifications.
INBOX_SIZE = 100


class Missing(Exception):
    """The object does not exist for this caller (another organisation's is missing too)."""


class Refused(Exception):
    """A value the service refused; `field` names it (the panel words the message itself)."""

    def __init__(self, field: str, value: object) -> None:
        super().__init__(field)
        self.field = field
        self.value = value


def _refused(exc: InvalidInput) -> Refused:
    return Refused(str(exc.fields.get("field")), exc.fields.get("value"))


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
    return services.sessions.find(secret, now=now)


def close_session(services: Services, secret: str | None) -> None:
    services.sessions.close(secret)


# The platform's settings


def platform(services: Services) -> PlatformSettings:
    return services.settings.get()


def session_actor(session: PanelSession) -> Actor:
    """Who the trail names for a panel action: the signed-in credential (names are on it)."""
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
        raise _refused(exc) from exc


# Agents


def list_agents(services: Services, org_id: UUID, *, now: datetime) -> AgentOverview:
    return services.agents.overview(org_id, now=now)


@dataclass(frozen=True, kw_only=True)
class AgentDetail:
    """The agent page (summary, next slot, newest runs) and its timeline."""

    page: AgentPage
    events: tuple[EventView, ...]


def agent_detail(services: Services, org_id: UUID, agent_id: UUID, *, now: datetime) -> AgentDetail:
    try:
        page = services.agents.agent_page(org_id, agent_id, now=now)
        timeline = services.events.agent_events(org_id, agent_id, limit=TIMELINE_EVENTS)
    except NotFound as exc:
        raise Missing(str(agent_id)) from exc
    return AgentDetail(page=page, events=timeline.events)


def save_schedule(
    services: Services,
    org_id: UUID,
    agent_id: UUID,
    *,
    enabled: bool,
    times: Sequence[str],
    now: datetime,
    actor: Actor,
) -> None:
    """Store a schedule the panel already checked with `schedule_problem`; the service checks
    again (the API's rules) and the database a third time."""
    try:
        services.agents.set_schedule(
            org_id, agent_id, enabled=enabled, times=list(times), now=now, actor=actor
        )
    except NotFound as exc:
        raise Missing(str(agent_id)) from exc
    except InvalidInput as exc:
        raise _refused(exc) from exc


@dataclass(frozen=True, kw_only=True)
class ManualRun:
    """A manual update of one agent, as its progress page shows it."""

    agent_name: str
    run: RunView


# A manual run is looked for among the agent's newest runs: the one a reader follows is recent.
PROGRESS_RUNS = 50


def manual_run(
    services: Services, org_id: UUID, agent_id: UUID, run_id: UUID, *, now: datetime
) -> ManualRun:
    """The agent's manual run `run_id`; another organisation's, or a scheduled one, is missing."""
    try:
        page = services.agents.agent_page(org_id, agent_id, now=now)
        runs = services.runs.agent_runs(org_id, agent_id, limit=PROGRESS_RUNS).runs
    except NotFound as exc:
        raise Missing(str(agent_id)) from exc
    for run in runs:
        if run.run_id == run_id and run.trigger == "manual":
            return ManualRun(agent_name=page.name, run=run)
    raise Missing(str(run_id))


def request_update(
    services: Services, org_id: UUID, agent_id: UUID, by: UUID, *, now: datetime
) -> RecordedRun:
    try:
        return services.runs.request_manual_update(org_id, agent_id, by, now=now)
    except NotFound as exc:
        raise Missing(str(agent_id)) from exc


# Notifications and the webhook


def notifications(services: Services, org_id: UUID) -> NotificationPage:
    """The unread count and the newest notifications."""
    return services.notifications.list(org_id, unread_only=False, limit=INBOX_SIZE)


def mark_notification(
    services: Services, org_id: UUID, notification_id: UUID, read: bool, *, now: datetime
) -> None:
    try:
        services.notifications.mark_read(org_id, notification_id, read=read, now=now)
    except NotFound as exc:
        raise Missing(str(notification_id)) from exc


def webhook(services: Services, org_id: UUID) -> WebhookView | None:
    try:
        return services.webhooks.get(org_id)
    except NotFound:
        return None


def save_webhook(
    services: Services, org_id: UUID, url: str, secret: str | None, *, now: datetime
) -> str | None:
    """Store the webhook; returns the generated secret (shown once) when none was given."""
    try:
        saved = services.webhooks.put(org_id, url=url, secret=secret, now=now)
    except InvalidInput as exc:
        raise _refused(exc) from exc
    return saved.secret


def delete_webhook(services: Services, org_id: UUID) -> None:
    services.webhooks.delete(org_id)


@dataclass(frozen=True, kw_only=True)
class WebhookTest:
    """A test delivery as the webhook page shows it (sent now, or the last one recorded)."""

    at: datetime
    delivered: bool
    status_code: int | None
    failure: str | None
    detail: str | None


def send_webhook_test(
    services: Services, org_id: UUID, *, actor: Actor, now: datetime
) -> WebhookTest:
    """A signed test POST to the organisation's webhook, by the real deliveries' rules."""
    try:
        sent = services.webhook_tests.send(org_id, now=now, actor=actor)
    except NotFound as exc:
        raise Missing("webhook") from exc
    return WebhookTest(
        at=sent.sent_at,
        delivered=sent.delivered,
        status_code=sent.status_code,
        failure=sent.failure,
        detail=sent.detail,
    )


def last_webhook_test(services: Services, org_id: UUID) -> WebhookTest | None:
    """The organisation's newest test delivery, from the trail (`webhook.tested`)."""
    found = services.events.trail(EventFilter(org_id=org_id, kind=TEST_EVENT, limit=1)).events
    if not found:
        return None
    data = found[0].data
    return WebhookTest(
        at=found[0].at,
        delivered=bool(data.get("delivered")),
        status_code=data.get("status_code"),
        failure=data.get("failure"),
        detail=data.get("detail"),
    )


# The forecast and the nights


def org_forecast(services: Services, org_id: UUID, day: date) -> OrgDayForecast:
    return services.forecast.org_day(day, org_id=org_id)


def platform_forecast(services: Services, day: date) -> PlatformDayForecast:
    return services.forecast.platform_day(day)


def grants_per_round(services: Services, *, since: datetime, until: datetime) -> GrantHistory:
    return services.claims.grants_per_round(since=since, until=until)


def outcomes_per_slot(services: Services, *, since: datetime, until: datetime) -> NightOutcomes:
    return services.runs.outcomes_per_slot(since=since, until=until)


# The fleet


def fleet_versions(services: Services) -> tuple[list[str | None], dict[str, set[str]]]:
    """Every live agent's reported version, and the pairs ("channel/platform") each version was
    published for. One query per organisation: an operator's page, loaded now and then."""
    orgs = {
        c.org_id
        for c in services.accounts.list_credentials(
            audience=Audience.PANEL, include_revoked=True
        ).credentials
        if c.org_id is not None
    }
    versions: list[str | None] = []
    for org_id in sorted(orgs):
        versions.extend(agent.version for agent in services.agents.list_agents(org_id).agents)
    pairs: dict[str, set[str]] = {}
    for track in services.releases.list().tracks:
        for entry in track.releases:
            pairs.setdefault(entry.version, set()).add(f"{track.channel}/{track.platform}")
    return versions, pairs


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
        raise _refused(exc) from exc
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
        raise _refused(exc) from exc


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
    try:
        return services.accounts.revoke(credential_id, now=now, actor=actor)
    except NotFound as exc:
        raise Missing(str(credential_id)) from exc


# The brake


def brake(services: Services) -> BrakeState:
    return services.brake.get()


def set_brake(
    services: Services, *, engaged: bool, reason: str | None, actor: Actor, now: datetime
) -> BrakeChange:
    # The panel's brake also revokes the tokens already granted: an operator who pulls it in an
    # emergency means "stop", not "stop after the ones already downloading".
    return services.brake.set(
        engaged=engaged, reason=reason, revoke_outstanding=True, actor=actor, now=now
    )
