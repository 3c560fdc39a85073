"""`HistoryService`: an organisation's runs and events a page at a time, an export's rows, and the
agents per version night by night.

Pages are keyset pages: a page names the position (time, id) of its first and last row, and the
next page asks for the rows beyond one of them, so a page deep in a year of history costs what
the first one does (an OFFSET would read every row it skips).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, Generic, TypeVar
from uuid import UUID
from zoneinfo import ZoneInfo

from control_plane.agent_scope import require_agent
from control_plane.errors import InvalidInput
from control_plane.events.services import EventView, event_view
from control_plane.history.data import (
    Direction,
    Table,
    page_statement,
    versions_per_night_statement,
)
from control_plane.runs.views import RunView, run_view
from control_plane.types import Connection, Pool

__all__ = [
    "MAX_EXPORT_DAYS",
    "MAX_NIGHTS",
    "MAX_PAGE",
    "DayRange",
    "HistoryEvent",
    "HistoryPage",
    "HistoryQuery",
    "HistoryRun",
    "HistoryService",
    "NightVersions",
    "Position",
]

MAX_PAGE = 200
# An export covers at most this many days: a quarter of an organisation of 2,000 agents is some
# 200,000 runs, streamed a few hundred rows at a time.
MAX_EXPORT_DAYS = 92
# The versions per night go back at most this many nights: they are read from the runs, a
# night of 2,000 agents' runs in some 15 ms (bench/history_pages.py); further back would want a
# count kept per night.
MAX_NIGHTS = 30
# Rows an export's server-side cursor fetches at a time.
EXPORT_BATCH = 500


@dataclass(frozen=True, kw_only=True)
class Position:
    """Where a row stands in its history: its time, then its id among rows of the same time."""

    at: datetime
    id: UUID | int

    def __post_init__(self) -> None:
        if self.at.tzinfo is None:
            raise InvalidInput("at", self.at.isoformat(), "has no time zone (expected UTC)")


@dataclass(frozen=True, kw_only=True)
class DayRange:
    """Days of the organisation's calendar in `zone`, `first` to `last` both included (either
    end open when None). A range is counted in days, whatever their hours (a day of 23 or 25
    hours is a day); its instants are the first day's midnight and the midnight after the last,
    or for the calendar's last day, which has none, the last instant a datetime holds."""

    zone: ZoneInfo
    first: date | None = None
    last: date | None = None

    @property
    def since(self) -> datetime | None:
        if self.first is None:
            return None
        return datetime.combine(self.first, datetime.min.time(), self.zone)

    @property
    def until(self) -> datetime | None:
        if self.last is None:
            return None
        if self.last == date.max:
            return datetime.max.replace(tzinfo=UTC)
        return datetime.combine(self.last + timedelta(days=1), datetime.min.time(), self.zone)


@dataclass(frozen=True, kw_only=True)
class HistoryQuery:
    """One organisation's history, of one agent when `agent_id` is given, in the range of days
    `days` when given; a page `before` (older than) or `after` (newer than) a position, else the
    newest."""

    org_id: UUID
    agent_id: UUID | None = None
    days: DayRange | None = None
    before: Position | None = None
    after: Position | None = None
    limit: int = 50

    def __post_init__(self) -> None:
        if not 1 <= self.limit <= MAX_PAGE:
            raise InvalidInput("limit", self.limit, f"is out of range (expected 1 to {MAX_PAGE})")
        if self.before is not None and self.after is not None:
            raise InvalidInput("after", self.after, "is given with `before` (expected one)")

    @property
    def since(self) -> datetime | None:
        return None if self.days is None else self.days.since

    @property
    def until(self) -> datetime | None:
        return None if self.days is None else self.days.until


@dataclass(frozen=True, kw_only=True)
class HistoryRun:
    run: RunView
    agent_name: str

    @property
    def position(self) -> Position:
        return Position(at=self.run.created_at, id=self.run.run_id)


@dataclass(frozen=True, kw_only=True)
class HistoryEvent:
    event: EventView
    agent_id: UUID | None
    agent_name: str | None  # None: an event of the organisation, not of one agent

    @property
    def position(self) -> Position:
        return Position(at=self.event.at, id=self.event.id)


Row = TypeVar("Row", HistoryRun, HistoryEvent)


@dataclass(frozen=True, kw_only=True)
class HistoryPage(Generic[Row]):
    """Newest first. `older` and `newer` are where the next page either way starts from (None:
    there is nothing that way: `older` None is the end of what is kept)."""

    rows: tuple[Row, ...]
    older: Position | None
    newer: Position | None


@dataclass(frozen=True, kw_only=True)
class NightVersions:
    night: date  # the local day the night's runs fall on (they run after midnight)
    agents: dict[str, int]  # version: how many agents' last run of the night reported it


def _history_run(row: dict[str, Any]) -> HistoryRun:
    return HistoryRun(run=run_view(row), agent_name=row["agent_name"])


def _history_event(row: dict[str, Any]) -> HistoryEvent:
    return HistoryEvent(
        event=event_view(row), agent_id=row["agent_id"], agent_name=row["agent_name"]
    )


class HistoryService:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def runs(self, query: HistoryQuery) -> HistoryPage[HistoryRun]:
        with self._pool.connection() as conn:
            rows = self._page(conn, "runs", query)
        return _paged(query, [_history_run(row) for row in rows])

    def events(self, query: HistoryQuery) -> HistoryPage[HistoryEvent]:
        with self._pool.connection() as conn:
            rows = self._page(conn, "events", query)
        return _paged(query, [_history_event(row) for row in rows])

    @staticmethod
    def _page(conn: Connection, table: Table, query: HistoryQuery) -> list[dict[str, Any]]:
        if query.agent_id is not None:
            require_agent(conn, query.org_id, query.agent_id)
        direction: Direction = "newer" if query.after is not None else "older"
        position = query.after or query.before
        statement, values = page_statement(
            table,
            org_id=query.org_id,
            agent_id=query.agent_id,
            since=query.since,
            until=query.until,
            position=(position.at, position.id) if position else None,
            direction=direction,
            # One more than the page: whether there is a page beyond it.
            limit=query.limit + 1,
        )
        return conn.execute(statement, values).fetchall()

    def export_runs(self, query: HistoryQuery) -> Iterator[HistoryRun]:
        """Every run of `query`'s range, newest first, read as the caller consumes them."""
        for row in self._export("runs", query):
            yield _history_run(row)

    def export_events(self, query: HistoryQuery) -> Iterator[HistoryEvent]:
        for row in self._export("events", query):
            yield _history_event(row)

    def check_export(self, query: HistoryQuery) -> None:
        """Refuse an export that is not one bounded range of the organisation's own history
        (before anything is streamed: an error then would cut a download short)."""
        days = query.days
        if days is None or days.first is None or days.last is None:
            raise InvalidInput("from", None, "is missing (an export needs a range of days)")
        held = (days.last - days.first).days + 1
        if held < 1:
            raise InvalidInput("to", days.last.isoformat(), "is before the range's first day")
        if held > MAX_EXPORT_DAYS:
            raise InvalidInput(
                "to",
                days.last.isoformat(),
                f"makes a range of {held} days (expected at most {MAX_EXPORT_DAYS})",
            )
        if query.agent_id is not None:
            with self._pool.connection() as conn:
                require_agent(conn, query.org_id, query.agent_id)

    def _export(self, table: Table, query: HistoryQuery) -> Iterator[dict[str, Any]]:
        self.check_export(query)
        statement, values = page_statement(
            table,
            org_id=query.org_id,
            agent_id=query.agent_id,
            since=query.since,
            until=query.until,
            position=None,
            direction="older",
            limit=None,
        )
        # A server-side cursor (it lives in a transaction): the rows come a batch at a time as
        # the download is written, never all in this process's memory.
        with (
            self._pool.connection() as conn,
            conn.transaction(),
            conn.cursor(name=f"history_export_{table}") as cursor,
        ):
            cursor.itersize = EXPORT_BATCH
            cursor.execute(statement, values)
            yield from cursor

    def versions_per_night(
        self, org_id: UUID, *, nights: int, zone: ZoneInfo, now: datetime
    ) -> tuple[NightVersions, ...]:
        """The last `nights` nights up to the one `now` is in or after, oldest first; a night
        without a run that reported a version is there with no agents."""
        if not 1 <= nights <= MAX_NIGHTS:
            raise InvalidInput("nights", nights, f"is out of range (expected 1 to {MAX_NIGHTS})")
        today = now.astimezone(zone).date()
        first = today - timedelta(days=nights - 1)
        since = datetime.combine(first, datetime.min.time(), zone)
        until = datetime.combine(today + timedelta(days=1), datetime.min.time(), zone)
        with self._pool.connection() as conn:
            rows = conn.execute(
                versions_per_night_statement(),
                {"org_id": org_id, "zone": zone.key, "since": since, "until": until},
            ).fetchall()
        per_night: dict[date, dict[str, int]] = {
            first + timedelta(days=n): {} for n in range(nights)
        }
        for row in rows:
            if row["night"] in per_night:
                per_night[row["night"]][row["version"]] = row["agents"]
        return tuple(NightVersions(night=n, agents=agents) for n, agents in per_night.items())


def _paged(query: HistoryQuery, rows: list[Row]) -> HistoryPage[Row]:
    more = len(rows) > query.limit
    rows = rows[: query.limit]
    if query.after is not None:
        # Read oldest first from the position; shown newest first like every page.
        rows.reverse()
        newer_exists, older_exists = more, True
    else:
        newer_exists, older_exists = query.before is not None, more
    return HistoryPage(
        rows=tuple(rows),
        older=rows[-1].position if rows and older_exists else None,
        newer=rows[0].position if rows and newer_exists else None,
    )
