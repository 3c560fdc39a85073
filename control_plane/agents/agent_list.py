"""One page of an organisation's agents, found, filtered, sorted and cut in SQL, and one schedule
set for many agents at once.

An organisation may have thousands of agents: a page is 50 rows, and the database counts, filters,
orders and cuts them, so a request never reads the whole organisation. The states a list filters
by are those one join can tell: the newest run (the list's "last outcome"), the connection, a
hold in force, a pin — and one the offer rule tells (`control_plane.rollout.offer.offers_from`):
not running the release it is offered, read for the whole organisation in its few set-based queries
and handed to the database as the list of those agents.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, get_args
from uuid import UUID

from psycopg.types.json import Jsonb

from control_plane.accounts.services import MAX_NAME_LENGTH
from control_plane.agent_scope import require_agents
from control_plane.agents.schedule import validated_schedule
from control_plane.errors import InvalidInput
from control_plane.events.trail import Actor, record_actions
from control_plane.rollout.kept_offers import refresh as refresh_kept_offers
from control_plane.runs.views import RUN_COLUMNS, RunView, run_view
from control_plane.types import Connection

__all__ = [
    "AGENT_SORTS",
    "AGENT_STATES",
    "MAX_SEARCH_LENGTH",
    "PAGE_SIZE",
    "AgentQuery",
    "AgentSort",
    "AgentState",
    "ScheduleChanges",
    "behind_ids",
    "found_page",
    "last_runs_by_id",
    "matching_ids",
    "set_schedules",
    "state_condition",
    "state_join",
]

PAGE_SIZE = 50
# No agent's name is longer, so a longer search can only find nothing.
MAX_SEARCH_LENGTH = MAX_NAME_LENGTH

# failed     its newest run failed or was rolled back
# missed     its newest run is a missed slot
# offline    not seen since the instant the caller calls "online" (or never seen)
# held       a hold is in force
# pinned     pinned, by its own pin or its organisation's
# behind     offered a release other than the one it last reported running (nothing offered:
#            not behind), as the offer rule and the release views judge "up to date"
# clock      its host's clock is further off than the agent follows (`agent_clocks`): its
#            scheduled slots are missed until the clock is set right
AgentState = Literal["failed", "missed", "offline", "held", "pinned", "behind", "clock"]
AGENT_STATES: tuple[AgentState, ...] = get_args(AgentState)
AgentSort = Literal["name", "version", "outcome", "seen"]
AGENT_SORTS: tuple[AgentSort, ...] = get_args(AgentSort)


@dataclass(frozen=True, kw_only=True)
class AgentQuery:
    """Which agents, in which order, which page: checked when built, naming the bad field."""

    search: str = ""  # a part of the name, any case; empty finds every agent
    state: AgentState | None = None
    sort: AgentSort = "name"
    descending: bool = False
    page: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.search, str) or len(self.search) > MAX_SEARCH_LENGTH:
            raise InvalidInput(
                "search", self.search, f"is not a text of at most {MAX_SEARCH_LENGTH} characters"
            )
        if "\x00" in self.search:
            raise InvalidInput("search", self.search, "holds a NUL character, which no name has")
        if self.state is not None and self.state not in AGENT_STATES:
            raise InvalidInput("state", self.state, f"is not one of {', '.join(AGENT_STATES)}")
        if self.sort not in AGENT_SORTS:
            raise InvalidInput("sort", self.sort, f"is not one of {', '.join(AGENT_SORTS)}")
        if not isinstance(self.descending, bool):
            raise InvalidInput("descending", self.descending, "is not true or false")
        if isinstance(self.page, bool) or not isinstance(self.page, int) or self.page < 1:
            raise InvalidInput("page", self.page, "is not a page number (1 or more)")


# The newest run of each agent, as `latest_run_per_agent` orders them (index runs_agent_created):
# joined only where a state, an order or the page's rows need it.
_NEWEST_RUN = (
    " LEFT JOIN LATERAL (SELECT r.id, r.status FROM runs r"
    " WHERE r.agent_id = a.id ORDER BY r.created_at DESC, r.id LIMIT 1) last ON true"
)
# MAJOR.MINOR.PATCH as numbers, then a prerelease before its release (prereleases among
# themselves in text order); a version the agent reported in another form has no key. A match
# without capturing groups, then a split: PostgreSQL's capturing matcher is far slower.
_VERSION_PARTS = (
    " CROSS JOIN LATERAL (SELECT CASE WHEN a.current_version"
    " ~ '^[0-9]{1,9}\\.[0-9]{1,9}\\.[0-9]{1,9}(-.+)?$' THEN true END AS ok) shaped"
    " CROSS JOIN LATERAL (SELECT"
    " CASE WHEN shaped.ok THEN string_to_array(split_part(a.current_version, '-', 1), '.')::int[]"
    " END AS numbers,"
    " CASE WHEN shaped.ok THEN nullif(substr(a.current_version,"
    " strpos(a.current_version || '-', '-') + 1), '') END AS pre) ver"
)
_RUN_STATES: tuple[AgentState, ...] = ("failed", "missed")
_STATE_WHERE: dict[AgentState, str] = {
    "failed": " AND last.status IN ('failed', 'rolled_back')",
    "missed": " AND last.status = 'missed'",
    "offline": " AND (a.last_seen_at IS NULL OR a.last_seen_at < %(online_since)s)",
    "held": " AND EXISTS (SELECT 1 FROM holds h WHERE h.agent_id = a.id AND h.until > %(now)s)",
    # Two EXISTS, not one with an OR: each is answered by its pins index (an OR inside one
    # compares every agent with every pin).
    "pinned": (
        " AND (EXISTS (SELECT 1 FROM pins p WHERE p.agent_id = a.id)"
        " OR EXISTS (SELECT 1 FROM pins p WHERE p.org_id = a.org_id))"
    ),
    "behind": " AND a.id = ANY(%(behind)s::uuid[])",
    "clock": " AND EXISTS (SELECT 1 FROM agent_clocks c WHERE c.agent_id = a.id)",
}


def state_condition(state: AgentState) -> str:
    """The SQL condition of `state` over `agents a` joined with `state_join()` (the list's own
    filter); its parameters are `now`, `online_since` and `behind` (`behind_ids`)."""
    return _STATE_WHERE[state].removeprefix(" AND ")


def state_join() -> str:
    """What `state_condition` needs beside `agents a`: each agent's newest run as `last`."""
    return _NEWEST_RUN


# strpos, not LIKE: a search holding % or _ means those characters, with nothing to escape.
_SEARCH_WHERE = " AND strpos(lower(a.name), lower(%(search)s)) > 0"

# Worst first: what needs a person comes before what went well; no run at all comes last.
_OUTCOME_RANK = (
    "CASE last.status WHEN 'failed' THEN 0 WHEN 'rolled_back' THEN 1 WHEN 'unauthorised' THEN 2"
    " WHEN 'missed' THEN 3 WHEN 'skipped' THEN 4 WHEN 'requested' THEN 5 WHEN 'claimed' THEN 6"
    " WHEN 'succeeded' THEN 7 WHEN 'up_to_date' THEN 8 END"
)
_SORT_KEYS: dict[AgentSort, tuple[str, ...]] = {
    "name": (),
    "version": (
        "ver.numbers",
        "(ver.pre IS NULL)",
        "ver.pre",
    ),
    "outcome": (_OUTCOME_RANK,),
    "seen": ("a.last_seen_at",),
}


def _where(query: AgentQuery, *, rows: bool = False) -> str:
    """FROM and WHERE for the query; `rows`: for its page (the order's keys, and the newest run
    when the order or the filter needs it)."""
    where = " FROM agents a"
    if query.state in _RUN_STATES or (rows and _newest_run_orders(query)):
        where += _NEWEST_RUN
    if rows and query.sort == "version":
        where += _VERSION_PARTS
    where += " WHERE a.org_id = %(org_id)s AND a.deleted_at IS NULL"
    if query.search:
        where += _SEARCH_WHERE
    if query.state is not None:
        where += _STATE_WHERE[query.state]
    return where


def _newest_run_orders(query: AgentQuery) -> bool:
    """Whether the query's order or filter reads each agent's newest run (else it is read for
    the page's rows only, after the cut)."""
    return query.state in _RUN_STATES or query.sort == "outcome"


def _parameters(
    conn: Connection, org_id: UUID, query: AgentQuery, *, now: datetime, online_since: datetime
) -> dict[str, Any]:
    parameters: dict[str, Any] = {
        "org_id": org_id,
        "search": query.search,
        "now": now,
        "online_since": online_since,
    }
    if query.state == "behind":
        parameters["behind"] = behind_ids(conn, org_id)
    return parameters


def behind_ids(conn: Connection, org_id: UUID) -> list[UUID]:
    """The organisation's live agents offered a release other than the one they last reported
    running, from the kept offers (`rollout.kept_offers`: the offer rule's answers, refreshed
    for the agents a write made stale)."""
    refresh_kept_offers(conn)
    rows = conn.execute(
        "SELECT a.id FROM agent_offers o JOIN agents a ON a.id = o.agent_id"
        " JOIN releases r ON r.id = o.release_id"
        " WHERE a.org_id = %s AND a.deleted_at IS NULL"
        " AND r.agent_version IS DISTINCT FROM a.current_version",
        [org_id],
    ).fetchall()
    return [row["id"] for row in rows]


_PAGE_COLUMNS = (
    "SELECT a.id, a.org_id, a.name, a.created_at, a.current_version, a.last_seen_at,"
    " a.update_schedule_enabled, a.update_schedule_times, last.id AS last_run_id,"
    " (SELECT uv.version FROM agent_updater_versions uv WHERE uv.agent_id = a.id)"
    " AS updater_version,"
    " (SELECT c.offset_seconds FROM agent_clocks c WHERE c.agent_id = a.id)"
    " AS host_clock_offset_seconds,"
    " (SELECT c.measured_at FROM agent_clocks c WHERE c.agent_id = a.id) AS host_clock_measured_at"
)


def found_page(
    conn: Connection, org_id: UUID, query: AgentQuery, *, now: datetime, online_since: datetime
) -> tuple[int, list[dict[str, Any]]]:
    """How many of the organisation's agents the query finds, and its page (none past the last
    page): each agent's row and the id of its newest run (`last_run_id`). What a filter needs
    beyond one join (the agents behind their offer) is read once for both.

    Every key sorts what is unknown (no version, no run, never seen) last in either direction,
    and ties go by name, so a page never shows an agent twice or skips one."""
    parameters = _parameters(conn, org_id, query, now=now, online_since=online_since)
    direction = "DESC" if query.descending else "ASC"
    keys = [f"{key} {direction} NULLS LAST" for key in _SORT_KEYS[query.sort]]
    keys += [f"a.name {direction}" if query.sort == "name" else "a.name", "a.id"]
    parameters |= {"limit": PAGE_SIZE, "offset": (query.page - 1) * PAGE_SIZE}
    cut = " ORDER BY " + ", ".join(keys) + " LIMIT %(limit)s OFFSET %(offset)s"
    if _newest_run_orders(query):
        page = _PAGE_COLUMNS + _where(query, rows=True) + cut
    else:
        # The newest run is one index probe per agent: made for the page's rows after the cut,
        # not for every agent the order passes over (2,000 probes for page 30 of 40).
        page = (
            _PAGE_COLUMNS
            + " FROM (SELECT a.*, row_number() OVER (ORDER BY "
            + ", ".join(keys)
            + ") AS position"
            + _where(query, rows=True)
            + cut
            + ") a"
            + _NEWEST_RUN
            + " ORDER BY a.position"
        )
    if query.state in _RUN_STATES:
        # The filter needs every agent's newest run: counted in the page's own pass over them
        # rather than a second time (a page past the end has no row to carry the count).
        counted = _PAGE_COLUMNS + ", count(*) OVER () AS total" + _where(query, rows=True) + cut
        rows = conn.execute(counted, parameters).fetchall()
        if rows:
            return int(rows[0]["total"]), rows
    row = conn.execute("SELECT count(*) AS n" + _where(query), parameters).fetchone()
    assert row is not None
    total = int(row["n"])
    if query.page > max(1, -(-total // PAGE_SIZE)):
        return total, []
    return total, conn.execute(page, parameters).fetchall()


def matching_ids(
    conn: Connection, org_id: UUID, query: AgentQuery, *, now: datetime, online_since: datetime
) -> list[UUID]:
    """Every agent the query finds (all its pages, its order aside), by id."""
    rows = conn.execute(
        "SELECT a.id" + _where(query) + " ORDER BY a.id",
        _parameters(conn, org_id, query, now=now, online_since=online_since),
    ).fetchall()
    return [row["id"] for row in rows]


def last_runs_by_id(conn: Connection, run_ids: Sequence[UUID]) -> dict[UUID, RunView]:
    """The runs a page shows as its agents' last outcome, by agent id."""
    if not run_ids:
        return {}
    rows = conn.execute(
        f"SELECT {RUN_COLUMNS}"  # noqa: S608 - constant columns
        " FROM runs r LEFT JOIN releases rel ON rel.id = r.release_id WHERE r.id = ANY(%s)",
        [list(run_ids)],
    ).fetchall()
    return {row["agent_id"]: run_view(row) for row in rows}


@dataclass(frozen=True, kw_only=True)
class ScheduleChanges:
    """One schedule set for many agents: how many it changed and how many were already on it."""

    changed: int
    unchanged: int


def set_schedules(
    conn: Connection,
    org_id: UUID,
    *,
    agent_ids: Sequence[UUID] | None = None,
    query: AgentQuery | None = None,
    enabled: object,
    times: object,
    now: datetime,
    online_since: datetime,
    actor: Actor,
) -> ScheduleChanges:
    """Set one schedule on the listed agents, or on every agent `query` finds (all its pages), in
    the caller's transaction: one `schedule.changed` event per agent whose schedule changed, none
    for an agent already on it. A listed agent that is not one of the organisation's is missing,
    and nothing changes."""
    if (agent_ids is None) == (query is None):
        raise ValueError("set_schedules takes agent_ids or query, exactly one")
    schedule = validated_schedule(enabled=enabled, times=times)
    after = {"enabled": schedule.enabled, "times": list(schedule.times)}
    if agent_ids is not None:
        rows = conn.execute(
            "SELECT a.id, a.update_schedule_enabled AS enabled, a.update_schedule_times AS times"
            " FROM agents a WHERE a.id = ANY(%s) ORDER BY a.id",
            [require_agents(conn, org_id, agent_ids, lock=True)],
        ).fetchall()
    else:
        assert query is not None
        rows = conn.execute(
            "SELECT a.id, a.update_schedule_enabled AS enabled, a.update_schedule_times AS times"
            + _where(query)
            + " ORDER BY a.id FOR UPDATE OF a",
            _parameters(conn, org_id, query, now=now, online_since=online_since),
        ).fetchall()
    changed = [row for row in rows if {"enabled": row["enabled"], "times": row["times"]} != after]
    if changed:
        conn.execute(
            "UPDATE agents SET update_schedule_enabled = %s, update_schedule_times = %s"
            " WHERE id = ANY(%s)",
            [schedule.enabled, Jsonb(after["times"]), [row["id"] for row in changed]],
        )
    record_actions(
        conn,
        kind="schedule.changed",
        actor=actor,
        at=now,
        org_id=org_id,
        agent_ids=[row["id"] for row in changed],
        data_each=[
            {"before": {"enabled": row["enabled"], "times": row["times"]}, "after": after}
            for row in changed
        ],
    )
    return ScheduleChanges(changed=len(changed), unchanged=len(rows) - len(changed))
