"""The panel's door to a customer's own things: agents, schedules, manual runs, notifications,
the webhook (its test deliveries too) and the enrollment tokens its hosts join with.

One of the four backend modules (see `backend`): it calls the domain services and turns their
refusals into the panel's `Missing` and `Refused`. Every function at an instant takes `now`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from uuid import UUID
from zoneinfo import ZoneInfo

from control_plane.agents.default_schedule import DefaultSchedule
from control_plane.agents.schedule import Schedule
from control_plane.agents.services import (
    AgentOverview,
    AgentOverviewRow,
    AgentPage,
    NextSlot,
    next_slot_view,
)
from control_plane.enrollment.rules import TokenTerms
from control_plane.enrollment.services import EnrollmentTokenList, IssuedEnrollmentToken
from control_plane.errors import InvalidInput, NotFound
from control_plane.events.services import EventFilter, EventView
from control_plane.events.trail import Actor
from control_plane.history import HistoryEvent, HistoryPage, HistoryQuery, HistoryRun, NightVersions
from control_plane.notifications.addresses import ADDRESS_REFUSED
from control_plane.notifications.services import NotificationPage, WebhookView
from control_plane.notifications.trial_delivery import TEST_EVENT
from control_plane.panel.backend import Missing, Refused, missing_as, missing_or_refused, refused
from control_plane.registry import Services
from control_plane.rollout.services import AgentRelease
from control_plane.runs.services import ManualRequests, RecordedRun
from control_plane.runs.views import RunView
from control_plane.settings.services import PlatformSettings

__all__ = [
    "AgentDetail",
    "ManualRun",
    "WebhookTest",
    "agent_detail",
    "agent_name",
    "create_enrollment_token",
    "default_schedule",
    "delete_webhook",
    "enrollment_tokens",
    "export_history",
    "history_page",
    "last_webhook_test",
    "list_agents",
    "manual_run",
    "mark_notification",
    "notifications",
    "request_update",
    "request_updates",
    "revoke_enrollment_token",
    "save_default_schedule",
    "save_schedule",
    "save_webhook",
    "send_webhook_test",
    "versions_per_night",
    "webhook",
]


# The timeline shows this many of the agent's newest events.
TIMELINE_EVENTS = 50
# The inbox shows this many of the newest notifications.
INBOX_SIZE = 100


# Agents


def list_agents(services: Services, org_id: UUID, *, now: datetime) -> AgentOverview:
    return services.agents.overview(org_id, now=now)


@dataclass(frozen=True, kw_only=True)
class AgentDetail:
    """The agent page (summary, next slot, newest runs), its timeline and its release (pair,
    offer, pin, canary, hold): what the customer's and the operator's agent pages both show.
    A held agent's next slot is the first one the hold lets run (`slot_after_hold`)."""

    page: AgentPage
    events: tuple[EventView, ...]
    release: AgentRelease


def agent_detail(services: Services, org_id: UUID, agent_id: UUID, *, now: datetime) -> AgentDetail:
    with missing_as(str(agent_id)):
        page = services.agents.agent_page(org_id, agent_id, now=now)
        timeline = services.events.agent_events(org_id, agent_id, limit=TIMELINE_EVENTS)
        release = services.rollout.agent_release(agent_id, org_id=org_id, now=now)
    if release.hold is not None and page.next_slot is not None:
        held_slot = slot_after_hold(page.schedule, release.hold.until, services.settings.get())
        page = replace(page, next_slot=held_slot)
    return AgentDetail(page=page, events=timeline.events, release=release)


def listed_next_slots(
    agents: Sequence[AgentOverviewRow],
    releases: Mapping[UUID, AgentRelease],
    settings: PlatformSettings,
) -> dict[UUID, NextSlot | None]:
    """Each listed agent's next slot, by id: a held agent's is the first its hold lets run, as on
    its own page."""
    slots = {}
    for agent in agents:
        release = releases.get(agent.id)
        slot = agent.next_slot
        if slot is not None and release is not None and release.hold is not None:
            slot = slot_after_hold(agent.schedule, release.hold.until, settings)
        slots[agent.id] = slot
    return slots


def slot_after_hold(
    schedule: Schedule, until: datetime, settings: PlatformSettings
) -> NextSlot | None:
    """The agent's first slot at or after `until`, when its hold ends: a slot is held while its
    claim comes before `until` (`claims.due_facts`), so the one at `until` runs."""
    return next_slot_view(schedule, settings, until - timedelta(microseconds=1))


def agent_name(services: Services, org_id: UUID, agent_id: UUID, *, now: datetime) -> str:
    with missing_as(str(agent_id)):
        return services.agents.agent_page(org_id, agent_id, now=now).name


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
    with missing_or_refused(str(agent_id)):
        services.agents.set_schedule(
            org_id, agent_id, enabled=enabled, times=list(times), now=now, actor=actor
        )


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
    with missing_as(str(agent_id)):
        page = services.agents.agent_page(org_id, agent_id, now=now)
        runs = services.runs.agent_runs(org_id, agent_id, limit=PROGRESS_RUNS).runs
    for run in runs:
        if run.run_id == run_id and run.trigger == "manual":
            return ManualRun(agent_name=page.name, run=run)
    raise Missing(str(run_id))


def request_update(
    services: Services,
    org_id: UUID,
    agent_id: UUID,
    by: UUID | None,
    *,
    now: datetime,
    person: tuple[UUID, str] | None = None,
) -> RecordedRun:
    with missing_as(str(agent_id)):
        return services.runs.request_manual_update(org_id, agent_id, by, now=now, person=person)


def default_schedule(services: Services, org_id: UUID) -> DefaultSchedule:
    with missing_as(str(org_id)):
        return services.agents.default_schedule(org_id)


def save_default_schedule(
    services: Services,
    org_id: UUID,
    *,
    enabled: bool,
    times: list[str],
    now: datetime,
    actor: Actor,
) -> DefaultSchedule:
    with missing_or_refused(str(org_id)):
        return services.agents.set_default_schedule(
            org_id, enabled=enabled, times=times, now=now, actor=actor
        )


def request_updates(
    services: Services,
    org_id: UUID,
    agent_ids: Sequence[UUID],
    by: UUID | None,
    *,
    now: datetime,
    person: tuple[UUID, str] | None = None,
) -> ManualRequests:
    """An update now for each agent listed (all or none): through the caps like one agent's."""
    with missing_as(str(org_id)):
        return services.runs.request_manual_updates(org_id, agent_ids, by, now=now, person=person)


# Notifications and the webhook


def notifications(services: Services, org_id: UUID) -> NotificationPage:
    """The unread count and the newest notifications."""
    return services.notifications.list(org_id, unread_only=False, limit=INBOX_SIZE)


def mark_notification(
    services: Services, org_id: UUID, notification_id: UUID, read: bool, *, now: datetime
) -> None:
    with missing_as(str(notification_id)):
        services.notifications.mark_read(org_id, notification_id, read=read, now=now)


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
        if exc.code == ADDRESS_REFUSED:
            # A well-formed address the policy refuses: said apart from a malformed one.
            raise Refused("address", url) from exc
        raise refused(exc) from exc
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
    with missing_as("webhook"):
        sent = services.webhook_tests.send(org_id, now=now, actor=actor)
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


# Enrollment tokens


def enrollment_tokens(services: Services, org_id: UUID, *, now: datetime) -> EnrollmentTokenList:
    return services.enrollment.list(org_id=org_id, now=now)


def newest_trust_root(services: Services) -> int | None:
    """The newest published trust root's version, which a host's install line trusts."""
    return services.trust_roots.newest_version()


def create_enrollment_token(
    services: Services,
    org_id: UUID,
    *,
    uses: int,
    expires_in: timedelta,
    name_pattern: str | None,
    label: str | None,
    actor: Actor,
    now: datetime,
) -> IssuedEnrollmentToken:
    """A token of the organisation; a term out of bounds is `Refused` naming it."""
    try:
        terms = TokenTerms(uses=uses, expires_in=expires_in, name_pattern=name_pattern, label=label)
        return services.enrollment.create(org_id, terms, now=now, actor=actor)
    except InvalidInput as exc:
        raise refused(exc) from exc


def revoke_enrollment_token(
    services: Services, org_id: UUID, token_id: UUID, *, actor: Actor, now: datetime
) -> None:
    with missing_as(str(token_id)):
        services.enrollment.revoke(token_id, org_id=org_id, now=now, actor=actor)


# History


def history_page(
    services: Services, what: str, query: HistoryQuery
) -> HistoryPage[HistoryRun] | HistoryPage[HistoryEvent]:
    """A page of the organisation's runs or events; another organisation's agent is missing."""
    with missing_as(str(query.agent_id)):
        if what == "runs":
            return services.history.runs(query)
        return services.history.events(query)


def export_history(
    services: Services, what: str, query: HistoryQuery
) -> Iterator[HistoryRun] | Iterator[HistoryEvent]:
    """The rows of an export, checked before the first is read: a range out of bounds is
    `Refused` naming its field, another organisation's agent is missing."""
    with missing_or_refused(str(query.agent_id)):
        services.history.check_export(query)
    if what == "runs":
        return services.history.export_runs(query)
    return services.history.export_events(query)


def versions_per_night(
    services: Services, org_id: UUID, *, nights: int, zone: ZoneInfo, now: datetime
) -> tuple[NightVersions, ...]:
    return services.history.versions_per_night(org_id, nights=nights, zone=zone, now=now)
