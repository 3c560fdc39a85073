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
    Principal,
    actor_of,
)
from control_plane.accounts.sessions import OpenedSession, PanelSession
from control_plane.agents.fleet import FleetVersions, OrgName
from control_plane.agents.services import AgentOverview, AgentPage
from control_plane.brake.services import BrakeChange, BrakeState
from control_plane.claims.services import GrantHistory
from control_plane.errors import Conflict, Forbidden, InvalidInput, NotFound, Unauthenticated
from control_plane.events.services import EventFilter, EventView
from control_plane.events.trail import Actor
from control_plane.forecast.model import OrgDayForecast, PlatformDayForecast
from control_plane.notifications.services import NotificationPage, WebhookView
from control_plane.notifications.test_delivery import TEST_EVENT
from control_plane.pins.holds import HoldSetter
from control_plane.pins.services import PinView
from control_plane.registry import Services
from control_plane.releases.withdrawal import ReleaseList, WithdrawnRelease
from control_plane.rollout.halts import HaltView, OperatorNotice
from control_plane.rollout.services import AgentRelease, RolloutOverview
from control_plane.runs.services import NightOutcomes, RecordedRun
from control_plane.runs.views import RunView
from control_plane.settings.services import PlatformSettings
from ground.contract import HoldView

__all__ = [
    "AgentDetail",
    "ManualRun",
    "Missing",
    "Refused",
    "ReleaseState",
    "WebhookTest",
    "agent_detail",
    "agent_release",
    "agent_releases",
    "authenticate",
    "brake",
    "close_session",
    "credential",
    "credentials",
    "delete_webhook",
    "end_hold",
    "find_session",
    "fleet_versions",
    "force_update",
    "grants_per_round",
    "halt_release",
    "hold_agent",
    "issue_credential",
    "last_webhook_test",
    "list_agents",
    "manual_run",
    "mark_canary",
    "mark_notice_read",
    "mark_notification",
    "notices",
    "notifications",
    "open_session",
    "operator_orgs",
    "org_forecast",
    "org_names",
    "outcomes_per_slot",
    "pin",
    "pins",
    "platform",
    "platform_forecast",
    "promote_release",
    "release_states",
    "releases",
    "request_update",
    "resume_release",
    "revoke_credential",
    "rollout_overview",
    "rotate_credential",
    "save_schedule",
    "save_webhook",
    "send_webhook_test",
    "session_actor",
    "set_brake",
    "set_release_brake",
    "unpin",
    "unread_notices",
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


def platform_forecast(
    services: Services, day: date, *, now: datetime | None = None
) -> PlatformDayForecast:
    return services.forecast.platform_day(day, now=now)


def grants_per_round(services: Services, *, since: datetime, until: datetime) -> GrantHistory:
    return services.claims.grants_per_round(since=since, until=until)


def outcomes_per_slot(services: Services, *, since: datetime, until: datetime) -> NightOutcomes:
    return services.runs.outcomes_per_slot(since=since, until=until)


# The fleet


def fleet_versions(services: Services) -> FleetVersions:
    """Live agents per (channel, platform, version), in one query."""
    return services.fleet.versions()


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


# The rollout: stages, halts, the brake of one release, pins, holds, the operators' notices


def _domain_error(exc: Exception, subject: str) -> Exception:
    """A service's refusal as the panel's error: missing, a value refused at its field, or a
    state that does not allow it (the subject is the field)."""
    if isinstance(exc, NotFound):
        return Missing(subject)
    if isinstance(exc, InvalidInput):
        return _refused(exc)
    return Refused(subject, None)


@dataclass(frozen=True, kw_only=True)
class ReleaseState:
    """What the releases screen shows beside a release: its stage, its halt (the one in force,
    with its evidence) and its own brake (with why and by whom, from the trail)."""

    stage: str | None
    halt: HaltView | None
    braked: bool
    brake_reason: str | None
    braked_by: str | None


def release_states(
    services: Services, listed: ReleaseList, *, now: datetime
) -> dict[UUID, ReleaseState]:
    """Per release of the list: its stage and halt (`/metrics`' states: each pair's current
    release and every halted or braked one) and its brake's reason from the trail."""
    states = {
        (s.channel, s.platform, s.version): s for s in services.metrics.snapshot(now).releases
    }
    # The trail is newest first: the first brake event of a release is its brake's last change.
    brakes: dict[str, EventView] = {}
    for change in services.events.trail(EventFilter(kind="brake.", limit=500)).events:
        release_id = change.data.get("release_id")
        if release_id and release_id not in brakes:
            brakes[release_id] = change
    result: dict[UUID, ReleaseState] = {}
    for track in listed.tracks:
        for entry in track.releases:
            state = states.get((track.channel, track.platform, entry.version))
            halt = None
            if state is not None and state.halted:
                halt = next(
                    (h for h in services.rollout.halts(entry.id).halts if h.resumed_at is None),
                    None,
                )
            braked = state is not None and state.braked
            last = brakes.get(str(entry.id))
            engaged = braked and last is not None and last.kind == "brake.engaged"
            result[entry.id] = ReleaseState(
                stage=None if state is None else state.stage,
                halt=halt,
                braked=braked,
                brake_reason=last.data.get("reason") if engaged and last else None,
                braked_by=last.actor.name if engaged and last else None,
            )
    return result


def promote_release(
    services: Services, release_id: UUID, *, reason: str, actor: Actor, now: datetime
) -> None:
    try:
        services.rollout.promote(release_id, reason=reason, actor=actor, now=now)
    except (NotFound, InvalidInput, Conflict) as exc:
        raise _domain_error(exc, "release") from exc


def halt_release(
    services: Services, release_id: UUID, *, reason: str, actor: Actor, now: datetime
) -> HaltView:
    try:
        return services.rollout.halt(release_id, reason=reason, actor=actor, now=now)
    except (NotFound, InvalidInput, Conflict) as exc:
        raise _domain_error(exc, "release") from exc


def resume_release(
    services: Services, release_id: UUID, *, reason: str, actor: Actor, now: datetime
) -> HaltView:
    try:
        return services.rollout.resume(release_id, reason=reason, actor=actor, now=now)
    except (NotFound, InvalidInput, Conflict) as exc:
        raise _domain_error(exc, "release") from exc


def set_release_brake(
    services: Services,
    release_id: UUID,
    *,
    engaged: bool,
    reason: str | None,
    actor: Actor,
    now: datetime,
) -> None:
    try:
        services.brake.set_release(release_id, engaged=engaged, reason=reason, actor=actor, now=now)
    except (NotFound, InvalidInput, Conflict) as exc:
        raise _domain_error(exc, "release") from exc


def notices(services: Services) -> tuple[OperatorNotice, ...]:
    return services.rollout.notices().notices


def mark_notice_read(services: Services, notice_id: UUID, *, actor: Actor, now: datetime) -> None:
    try:
        services.rollout.mark_notice_read(notice_id, actor=actor, now=now)
    except NotFound as exc:
        raise Missing("notice") from exc


def unread_notices(services: Services) -> int:
    return sum(1 for notice in notices(services) if notice.read_at is None)


def rollout_overview(services: Services, *, now: datetime) -> RolloutOverview:
    return services.rollout.overview(now)


def operator_orgs(services: Services) -> tuple[OrgName, ...]:
    """Every organisation an operator can open, by name."""
    return services.fleet.org_names().orgs


def org_names(services: Services) -> dict[UUID, str]:
    """Each organisation's name by its id (the screens show names where they held ids)."""
    return {org.org_id: org.name for org in operator_orgs(services)}


def agent_release(
    services: Services, agent_id: UUID, *, org_id: UUID, now: datetime
) -> AgentRelease:
    try:
        return services.rollout.agent_release(agent_id, org_id=org_id, now=now)
    except NotFound as exc:
        raise Missing(str(agent_id)) from exc


def agent_releases(services: Services, org_id: UUID, *, now: datetime) -> dict[UUID, AgentRelease]:
    """Every agent of the organisation with its pair, offer, pin and hold, by agent id."""
    try:
        listed = services.rollout.org_agent_releases(org_id, now=now)
    except NotFound as exc:
        raise Missing(str(org_id)) from exc
    return {agent.agent_id: agent for agent in listed.agents}


def mark_canary(
    services: Services, agent_id: UUID, *, canary: bool, actor: Actor, now: datetime
) -> None:
    try:
        services.rollout.mark_canary(agent_id, canary=canary, actor=actor, now=now)
    except NotFound as exc:
        raise Missing(str(agent_id)) from exc


def force_update(
    services: Services, agent_id: UUID, *, reason: str, actor: Actor, now: datetime
) -> UUID:
    try:
        return services.rollout.force_update(agent_id, reason=reason, actor=actor, now=now).run_id
    except (NotFound, InvalidInput, Conflict) as exc:
        raise _domain_error(exc, "agent") from exc


def pins(services: Services) -> tuple[PinView, ...]:
    return services.pins.pins().pins


def pin(
    services: Services,
    *,
    org_id: UUID | None = None,
    agent_id: UUID | None = None,
    version: str | None,
    reason: str | None,
    actor: Actor,
    now: datetime,
) -> PinView:
    try:
        return services.pins.pin(
            org_id=org_id, agent_id=agent_id, version=version, reason=reason, actor=actor, now=now
        )
    except (NotFound, InvalidInput, Conflict) as exc:
        raise _domain_error(exc, "pin") from exc


def unpin(
    services: Services,
    *,
    org_id: UUID | None = None,
    agent_id: UUID | None = None,
    actor: Actor,
    now: datetime,
) -> None:
    try:
        services.pins.unpin(org_id=org_id, agent_id=agent_id, actor=actor, now=now)
    except NotFound as exc:
        raise Missing("pin") from exc


def hold_agent(
    services: Services,
    org_id: UUID,
    agent_id: UUID,
    *,
    until: datetime,
    reason: str,
    actor: Actor,
    now: datetime,
    set_by: HoldSetter = "customer",
) -> HoldView:
    """A hold of one of the organisation's agents, by its customer or an operator (another
    organisation's agent is missing)."""
    try:
        return services.pins.hold(
            agent_id,
            org_id=org_id,
            until=until,
            reason=reason,
            set_by=set_by,
            actor=actor,
            now=now,
        )
    except NotFound as exc:
        raise Missing(str(agent_id)) from exc
    except InvalidInput as exc:
        raise _refused(exc) from exc


def end_hold(
    services: Services, org_id: UUID, agent_id: UUID, *, actor: Actor, now: datetime
) -> None:
    try:
        services.pins.release_hold(agent_id, org_id=org_id, actor=actor, now=now)
    except NotFound as exc:
        raise Missing(str(agent_id)) from exc
