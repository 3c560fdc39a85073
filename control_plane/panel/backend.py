"""The panel's one door into the control plane's services.

Every page asks this module, never a service directly, so when the services move (one folder per
domain, typed results, `now` passed in) only this file changes. It turns the services' dicts into
the small frozen records the pages use, and their refusals into the panel's two errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

from control_plane.credentials import Audience
from control_plane.errors import Forbidden, InvalidInput, NotFound, Unauthenticated
from control_plane.services import Services
from control_plane.types import Pool

__all__ = [
    "AgentDetail",
    "AgentRow",
    "Brake",
    "Event",
    "Missing",
    "Notification",
    "Platform",
    "Refused",
    "Run",
    "SignIn",
    "Webhook",
    "agent_detail",
    "authenticate",
    "brake",
    "list_agents",
    "notifications",
    "org_forecast",
    "platform",
    "platform_forecast",
    "pool_of",
]

# An agent syncs every minute and records its visit at most every 30 seconds: three quiet minutes
# mean it is not reaching us.
ONLINE_WITHIN = timedelta(minutes=3)


class Missing(Exception):
    """The object does not exist for this caller (another organisation's is missing too)."""


class Refused(Exception):
    """A value the service refused; `field` names it (the panel words the message itself)."""

    def __init__(self, field: str, value: object) -> None:
        super().__init__(field)
        self.field = field
        self.value = value


def pool_of(services: Services) -> Pool:
    """The database pool the services share, for the panel's own table (its sessions).

    Today's services keep it private; after the reshape it is handed to the panel explicitly.
    """
    pool: Pool = services.settings._pool
    return pool


@dataclass(frozen=True, kw_only=True)
class Platform:
    zone: ZoneInfo
    catch_up_minutes: int
    org_cap: int
    global_cap: int


def platform(services: Services) -> Platform:
    settings = services.settings.get()
    return Platform(
        zone=settings.zone,
        catch_up_minutes=settings.catch_up_minutes,
        org_cap=settings.org_cap,
        global_cap=settings.global_cap,
    )


def update_platform(services: Services, changes: dict[str, Any]) -> Platform:
    try:
        services.settings.update(changes)
    except InvalidInput as exc:
        raise Refused(str(exc.fields.get("field")), exc.fields.get("value")) from exc
    return platform(services)


@dataclass(frozen=True, kw_only=True)
class SignIn:
    credential_id: UUID
    audience: str  # "panel" or "operator"
    org_id: UUID | None


def authenticate(services: Services, secret: str) -> SignIn | None:
    """Who this key is, when it is a live panel or operator key; None for anything else."""
    for audience in (Audience.PANEL, Audience.OPERATOR):
        try:
            principal = services.accounts.authenticate(secret, audience)
        except Forbidden:
            continue  # issued to another audience: try the next, refuse an agent's key
        except Unauthenticated:
            return None
        return SignIn(
            credential_id=principal.credential_id,
            audience=audience.value,
            org_id=principal.org_id,
        )
    return None


@dataclass(frozen=True, kw_only=True)
class Run:
    run_id: UUID
    trigger: str  # "schedule" | "manual"
    slot_key: str | None
    slot_at: datetime | None
    status: str
    miss_reason: str | None
    version: str | None
    release_version: str | None
    error: str | None
    created_at: datetime
    finished_at: datetime | None


def _run(view: dict[str, Any]) -> Run:
    return Run(
        run_id=view["run_id"],
        trigger=view["trigger"],
        slot_key=view["slot_key"],
        slot_at=view["slot_at"],
        status=view["status"],
        miss_reason=view["miss_reason"],
        version=view["version"],
        release_version=view["release_version"],
        error=view["error"],
        created_at=view["created_at"],
        finished_at=view["finished_at"],
    )


@dataclass(frozen=True, kw_only=True)
class AgentRow:
    agent_id: UUID
    name: str
    version: str | None
    enabled: bool
    times: tuple[str, ...]
    next_slot_at: datetime | None
    last_run: Run | None
    last_seen_at: datetime | None
    online: bool


def _online(last_seen_at: datetime | None, now: datetime) -> bool:
    return last_seen_at is not None and now - last_seen_at <= ONLINE_WITHIN


def _next_slot_at(services: Services, org_id: UUID, agent_id: UUID) -> datetime | None:
    page = services.agents.agent_page(org_id, agent_id)
    slot = page.get("next_slot")
    return None if slot is None else slot["at"]


def list_agents(services: Services, org_id: UUID, now: datetime) -> list[AgentRow]:
    rows = []
    for agent in services.agents.list_agents(org_id):
        runs = services.runs.agent_runs(org_id, agent["id"], limit=1)
        rows.append(
            AgentRow(
                agent_id=agent["id"],
                name=agent["name"],
                version=agent["version"],
                enabled=agent["schedule"]["enabled"],
                times=tuple(agent["schedule"]["times"]),
                next_slot_at=_next_slot_at(services, org_id, agent["id"]),
                last_run=_run(runs[0]) if runs else None,
                last_seen_at=agent["last_seen_at"],
                online=_online(agent["last_seen_at"], now),
            )
        )
    return rows


@dataclass(frozen=True, kw_only=True)
class Event:
    kind: str
    actor_kind: str
    at: datetime
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class AgentDetail:
    agent: AgentRow
    runs: tuple[Run, ...]
    events: tuple[Event, ...]


def agent_detail(services: Services, org_id: UUID, agent_id: UUID, now: datetime) -> AgentDetail:
    try:
        page = services.agents.agent_page(org_id, agent_id)
        runs = [_run(view) for view in services.runs.agent_runs(org_id, agent_id, limit=20)]
        events = services.runs.agent_events(org_id, agent_id, limit=50)
    except NotFound as exc:
        raise Missing(str(agent_id)) from exc
    slot = page.get("next_slot")
    agent = AgentRow(
        agent_id=page["id"],
        name=page["name"],
        version=page["version"],
        enabled=page["schedule"]["enabled"],
        times=tuple(page["schedule"]["times"]),
        next_slot_at=None if slot is None else slot["at"],
        last_run=runs[0] if runs else None,
        last_seen_at=page["last_seen_at"],
        online=_online(page["last_seen_at"], now),
    )
    return AgentDetail(
        agent=agent,
        runs=tuple(runs),
        events=tuple(
            Event(kind=e["kind"], actor_kind=e["actor"]["kind"], at=e["at"], data=e["data"] or {})
            for e in events
        ),
    )


def save_schedule(
    services: Services, org_id: UUID, agent_id: UUID, *, enabled: bool, times: Sequence[str]
) -> None:
    """Store a schedule the panel already checked with `schedule_problem`; the service checks
    again (the API's rules) and the database a third time."""
    try:
        services.agents.set_schedule(org_id, agent_id, enabled=enabled, times=list(times))
    except NotFound as exc:
        raise Missing(str(agent_id)) from exc
    except InvalidInput as exc:
        raise Refused(str(exc.fields.get("field")), exc.fields.get("value")) from exc


def request_update(services: Services, org_id: UUID, agent_id: UUID, by: UUID) -> Run:
    try:
        _, view = services.runs.request_manual_update(org_id, agent_id, by)
    except NotFound as exc:
        raise Missing(str(agent_id)) from exc
    return _run(view)


@dataclass(frozen=True, kw_only=True)
class Notification:
    notification_id: UUID
    slot_at: datetime
    read: bool
    body: dict[str, Any]


def notifications(services: Services, org_id: UUID) -> tuple[int, list[Notification]]:
    """The unread count and the newest notifications."""
    answer = services.reconcile.notifications.list(org_id, unread_only=False, limit=100)
    return answer["unread"], [
        Notification(
            notification_id=UUID(item["id"]),
            slot_at=datetime.fromisoformat(item["slot_at"]),
            read=item["read"],
            body=item["body"],
        )
        for item in answer["notifications"]
    ]


def mark_notification(services: Services, org_id: UUID, notification_id: UUID, read: bool) -> None:
    try:
        services.reconcile.notifications.mark_read(org_id, notification_id, read=read)
    except NotFound as exc:
        raise Missing(str(notification_id)) from exc


@dataclass(frozen=True, kw_only=True)
class Webhook:
    url: str
    deliveries: dict[str, int]


def webhook(services: Services, org_id: UUID) -> Webhook | None:
    try:
        answer = services.reconcile.webhooks.get(org_id)
    except NotFound:
        return None
    return Webhook(url=answer["url"], deliveries=dict(answer["deliveries"]))


def save_webhook(services: Services, org_id: UUID, url: str, secret: str | None) -> str | None:
    """Store the webhook; returns the generated secret (shown once) when none was given."""
    try:
        answer = services.reconcile.webhooks.put(org_id, url=url, secret=secret)
    except InvalidInput as exc:
        raise Refused(str(exc.fields.get("field")), exc.fields.get("value")) from exc
    generated: str | None = answer.get("secret")
    return generated


def delete_webhook(services: Services, org_id: UUID) -> None:
    services.reconcile.webhooks.delete(org_id)


@dataclass(frozen=True, kw_only=True)
class ForecastSlot:
    at: datetime
    agents: int
    can_update: int
    will_miss: int
    capacity: int  # what the caps can serve in the window (the org's or the platform's)
    limited_by: str | None = None


def _forecast_slots(answer: dict[str, Any], capacity_key: str) -> list[ForecastSlot]:
    return [
        ForecastSlot(
            at=datetime.fromisoformat(slot["at"]),
            agents=slot["agents"],
            can_update=slot["can_update"],
            will_miss=slot["will_miss"],
            capacity=slot[capacity_key],
            limited_by=slot.get("limited_by"),
        )
        for slot in answer["slots"]
    ]


def org_forecast(services: Services, org_id: UUID, day: date) -> list[ForecastSlot]:
    return _forecast_slots(services.reconcile.forecast.day(day, org_id=org_id), "org_capacity")


def platform_forecast(services: Services, day: date) -> list[ForecastSlot]:
    return _forecast_slots(services.reconcile.forecast.day(day), "capacity")


@dataclass(frozen=True, kw_only=True)
class Brake:
    engaged: bool
    reason: str | None
    changed_at: datetime | None
    revoked_tokens: int = 0


def brake(services: Services) -> Brake:
    state = services.brake.get()
    return Brake(engaged=state["engaged"], reason=state["reason"], changed_at=state["changed_at"])


def set_brake(services: Services, *, engaged: bool, reason: str | None, by: UUID) -> Brake:
    state = services.brake.set(engaged=engaged, reason=reason, revoke_outstanding=True, by=by)
    return Brake(
        engaged=state["engaged"],
        reason=state["reason"],
        changed_at=state["changed_at"],
        revoked_tokens=state["revoked_tokens"],
    )
