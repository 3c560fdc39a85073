"""The panel's view of an organisation's agents, and their schedules: all their SQL."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from control_plane.agent_scope import agent_not_found
from control_plane.agents.agent_list import (
    PAGE_SIZE,
    AgentQuery,
    ScheduleChanges,
    found_page,
    last_runs_by_id,
    matching_ids,
    set_schedules,
)
from control_plane.agents.default_schedule import (
    DefaultSchedule,
    read_default_schedule,
    set_default_schedule,
)
from control_plane.agents.org_summary import OrgAgentSummary, org_agent_summary
from control_plane.agents.schedule import Schedule, validated_schedule
from control_plane.events.trail import Actor, record_action
from control_plane.runs.views import RunView, latest_run_per_agent, latest_runs
from control_plane.settings.services import PlatformSettings, read_settings
from control_plane.types import Connection, Pool
from ground.contract import Instant
from shared_planner import next_slot, parse_times

__all__ = [
    "AgentList",
    "AgentOverview",
    "AgentOverviewRow",
    "AgentPage",
    "AgentService",
    "AgentSummary",
    "HostSighting",
    "NextSlot",
]

LATEST_RUNS = 10

_SELECT_AGENTS = (
    "SELECT id, org_id, name, created_at, current_version, last_seen_at,"
    " update_schedule_enabled, update_schedule_times,"
    " (SELECT uv.version FROM agent_updater_versions uv WHERE uv.agent_id = agents.id)"
    " AS updater_version, clock.offset_seconds AS host_clock_offset_seconds,"
    " clock.measured_at AS host_clock_measured_at"
    " FROM agents LEFT JOIN agent_clocks clock ON clock.agent_id = agents.id"
    " WHERE deleted_at IS NULL"
)
# Two hosts seen within this span answered for one agent credential: a copy of the credential
# (or a cloned machine), shown on the agent's page rather than silently alternating.
SHARED_IDENTITY_SPAN = timedelta(hours=24)


@dataclass(frozen=True, kw_only=True)
class AgentSummary:
    id: UUID
    org_id: UUID
    name: str
    created_at: Instant
    version: str | None
    last_seen_at: Instant | None
    schedule: Schedule
    # The version of nachtwacht's own agent (the updater) the host last reported; None: not yet.
    updater_version: str | None = None
    # The host's clock minus the control plane's, in seconds, while its latest poll that said its
    # time was further off than the agent follows (`agent_clocks`), and when that was measured;
    # None while it agrees (or the agent never said). Its scheduled slots are missed meanwhile.
    host_clock_offset_seconds: int | None = None
    host_clock_measured_at: Instant | None = None


@dataclass(frozen=True, kw_only=True)
class AgentList:
    agents: tuple[AgentSummary, ...]


@dataclass(frozen=True, kw_only=True)
class NextSlot:
    """The next slot of the agent's schedule in the platform's zone: its key, its local time and
    its instant. It follows the schedule alone: while the agent is held (its release view's
    `hold`), the slots before the hold's end are skipped."""

    key: str
    local_time: str
    timezone: str
    at: Instant


@dataclass(frozen=True, kw_only=True)
class HostSighting:
    """A host that presented this agent's credential (its `X-Nachtwacht-Host-Id`)."""

    host_id: str
    first_seen_at: Instant
    last_seen_at: Instant


@dataclass(frozen=True, kw_only=True)
class AgentPage(AgentSummary):
    next_slot: NextSlot | None
    latest_runs: tuple[RunView, ...]
    hosts: tuple[HostSighting, ...] = ()
    # More than one host answered for this agent within `SHARED_IDENTITY_SPAN` of the latest
    # sighting: the credential is in two places (re-enrolled on a second host, or copied).
    shared_identity: bool = False


def host_sightings(conn: Connection, agent_id: UUID) -> tuple[HostSighting, ...]:
    rows = conn.execute(
        "SELECT host_id, first_seen_at, last_seen_at FROM agent_hosts WHERE agent_id = %s"
        " ORDER BY last_seen_at DESC, host_id",
        [agent_id],
    ).fetchall()
    return tuple(HostSighting(**row) for row in rows)


def shared_identity(hosts: tuple[HostSighting, ...]) -> bool:
    if len(hosts) < 2:
        return False
    latest = hosts[0].last_seen_at
    return hosts[1].last_seen_at >= latest - SHARED_IDENTITY_SPAN


@dataclass(frozen=True, kw_only=True)
class AgentOverviewRow(AgentSummary):
    """An agent as the panel's list shows it: its next slot and its newest run beside it."""

    next_slot: NextSlot | None
    last_run: RunView | None


@dataclass(frozen=True, kw_only=True)
class AgentOverview:
    """A page of the list: its agents, how many the query found in all, and which page of how
    many it is (a page past the last one holds no agent: the caller says so)."""

    agents: tuple[AgentOverviewRow, ...]
    total: int
    page: int = 1
    pages: int = 1


def _summary_fields(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "org_id": row["org_id"],
        "name": row["name"],
        "created_at": row["created_at"],
        "version": row["current_version"],
        "last_seen_at": row["last_seen_at"],
        "schedule": Schedule(
            enabled=row["update_schedule_enabled"], times=tuple(row["update_schedule_times"])
        ),
        "updater_version": row.get("updater_version"),
        "host_clock_offset_seconds": row.get("host_clock_offset_seconds"),
        "host_clock_measured_at": row.get("host_clock_measured_at"),
    }


def next_slot_view(
    schedule: Schedule, settings: PlatformSettings, now: datetime
) -> NextSlot | None:
    """The next slot after `now` in the platform's zone, local and as an instant; None when off."""
    if not schedule.enabled or not schedule.times:
        return None
    slot = next_slot(parse_times(schedule.times), after=now, tz=settings.zone)
    return NextSlot(
        key=slot.key,
        local_time=slot.at.astimezone(settings.zone).isoformat(),
        timezone=settings.timezone,
        at=slot.at,
    )


class AgentService:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def list_agents(self, org_id: UUID) -> AgentList:
        with self._pool.connection() as conn:
            rows = conn.execute(
                _SELECT_AGENTS + " AND org_id = %s ORDER BY name, id",
                [org_id],
            ).fetchall()
        return AgentList(agents=tuple(AgentSummary(**_summary_fields(row)) for row in rows))

    def overview(
        self,
        org_id: UUID,
        *,
        now: datetime,
        query: AgentQuery | None = None,
        online_since: datetime | None = None,
    ) -> AgentOverview:
        """The agents at `now` with their next slot and newest run: with `query`, its one page
        (searched, filtered, sorted and cut by the database); without, every agent by name.
        `online_since`: an agent last seen before it is offline (for the `offline` state)."""
        since = now if online_since is None else online_since
        with self._pool.connection() as conn:
            settings = read_settings(conn)
            if query is None:
                rows = conn.execute(
                    _SELECT_AGENTS + " AND org_id = %s ORDER BY name, id",
                    [org_id],
                ).fetchall()
                last_runs = latest_run_per_agent(conn, org_id)
                total, page, pages = len(rows), 1, 1
            else:
                total, rows = found_page(conn, org_id, query, now=now, online_since=since)
                pages = max(1, -(-total // PAGE_SIZE))
                page = query.page
                run_ids = [row["last_run_id"] for row in rows if row["last_run_id"] is not None]
                last_runs = last_runs_by_id(conn, run_ids)
        agents = []
        for row in rows:
            fields = _summary_fields(row)
            agents.append(
                AgentOverviewRow(
                    **fields,
                    next_slot=next_slot_view(fields["schedule"], settings, now),
                    last_run=last_runs.get(row["id"]),
                )
            )
        return AgentOverview(agents=tuple(agents), total=total, page=page, pages=pages)

    def org_summary(
        self, org_id: UUID, *, now: datetime, online_since: datetime
    ) -> OrgAgentSummary:
        """The organisation's agents per state of the list and per coming slot
        (`control_plane.agents.org_summary`)."""
        with self._pool.connection() as conn:
            settings = read_settings(conn)
            return org_agent_summary(
                conn, org_id, settings=settings, now=now, online_since=online_since
            )

    def set_schedules(
        self,
        org_id: UUID,
        *,
        agent_ids: Sequence[UUID] | None = None,
        query: AgentQuery | None = None,
        enabled: object,
        times: object,
        now: datetime,
        online_since: datetime | None = None,
        actor: Actor,
    ) -> ScheduleChanges:
        """One schedule for the listed agents or for every agent `query` finds (all its pages),
        checked with the same rules as `set_schedule`, in one transaction: a change each for the
        trail, none for an agent already on it."""
        with self._pool.connection() as conn, conn.transaction():
            return set_schedules(
                conn,
                org_id,
                agent_ids=agent_ids,
                query=query,
                enabled=enabled,
                times=times,
                now=now,
                online_since=now if online_since is None else online_since,
                actor=actor,
            )

    def matching_ids(
        self, org_id: UUID, query: AgentQuery, *, now: datetime, online_since: datetime
    ) -> tuple[UUID, ...]:
        """Every agent of the organisation `query` finds (all its pages), by id."""
        with self._pool.connection() as conn:
            return tuple(matching_ids(conn, org_id, query, now=now, online_since=online_since))

    def default_schedule(self, org_id: UUID) -> DefaultSchedule:
        """The schedule the organisation's new agents take (None in it: the platform's)."""
        with self._pool.connection() as conn:
            return read_default_schedule(conn, org_id)

    def set_default_schedule(
        self, org_id: UUID, *, enabled: object, times: object, now: datetime, actor: Actor
    ) -> DefaultSchedule:
        """Set the schedule new agents take; no agent already enrolled changes."""
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT 1 FROM orgs WHERE id = %s FOR UPDATE", [org_id])
            return set_default_schedule(
                conn, org_id, enabled=enabled, times=times, now=now, actor=actor
            )

    def agent_page(self, org_id: UUID, agent_id: UUID, *, now: datetime) -> AgentPage:
        """The agent page at `now`: its summary, its next slot and its latest runs."""
        with self._pool.connection() as conn:
            row = _agent_row(conn, org_id, agent_id)
            settings = read_settings(conn)
            runs = latest_runs(conn, agent_id, LATEST_RUNS)
            hosts = host_sightings(conn, agent_id)
        fields = _summary_fields(row)
        return AgentPage(
            **fields,
            next_slot=next_slot_view(fields["schedule"], settings, now),
            latest_runs=runs,
            hosts=hosts,
            shared_identity=shared_identity(hosts),
        )

    def set_schedule(
        self,
        org_id: UUID,
        agent_id: UUID,
        *,
        enabled: object,
        times: object,
        now: datetime,
        actor: Actor | None = None,
    ) -> AgentPage:
        """Validate with the planner's rules (422 naming the bad value) and store, times sorted;
        the change is on the trail with its actor (a panel user, or an operator's command)."""
        schedule = validated_schedule(enabled=enabled, times=times)
        with self._pool.connection() as conn, conn.transaction():
            before = conn.execute(
                "SELECT update_schedule_enabled AS enabled, update_schedule_times AS times"
                " FROM agents WHERE id = %s AND org_id = %s AND deleted_at IS NULL FOR UPDATE",
                [agent_id, org_id],
            ).fetchone()
            if before is None:
                raise agent_not_found(agent_id)
            conn.execute(
                "UPDATE agents SET update_schedule_enabled = %s, update_schedule_times = %s"
                " WHERE id = %s",
                [schedule.enabled, Jsonb(list(schedule.times)), agent_id],
            )
            after = {"enabled": schedule.enabled, "times": list(schedule.times)}
            if before != after:
                record_action(
                    conn,
                    kind="schedule.changed",
                    actor=actor or Actor(kind="operator"),
                    at=now,
                    org_id=org_id,
                    agent_id=agent_id,
                    data={"before": before, "after": after},
                )
        return self.agent_page(org_id, agent_id, now=now)


def _agent_row(conn: Connection, org_id: UUID, agent_id: UUID) -> dict[str, Any]:
    row = conn.execute(
        _SELECT_AGENTS + " AND id = %s AND org_id = %s", [agent_id, org_id]
    ).fetchone()
    if row is None:
        raise agent_not_found(agent_id)
    return row
