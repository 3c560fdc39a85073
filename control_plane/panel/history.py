"""The customer's history pages: the view in the URL (runs or events, one agent or all, a range of
days, a page's position) read field by field; the links that page it and keep the rest; the CSV
export's lines; the agents per version, night by night, as a picture.

A page's position is `<microseconds since 1970 UTC>.<id>` in the URL: exact (no float), and
nothing to escape.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import Literal
from urllib.parse import urlencode
from uuid import UUID
from zoneinfo import ZoneInfo

from markupsafe import Markup
from starlette.datastructures import QueryParams

from control_plane.history import (
    DayRange,
    HistoryEvent,
    HistoryQuery,
    HistoryRun,
    NightVersions,
    Position,
)
from control_plane.panel.charts import Series, Stack, stacked_chart
from control_plane.panel.form_refusal import given_twice, two_values
from control_plane.panel.i18n import Language
from ground.contract.plain_text import shown
from ground.whole_numbers import whole_number

__all__ = [
    "EVENT_COLUMNS",
    "PAGE_SIZE",
    "RUN_COLUMNS",
    "HistoryView",
    "csv_cell",
    "event_lines",
    "read_view",
    "run_lines",
    "versions_chart",
]

PAGE_SIZE = 50
What = Literal["runs", "events"]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# The most common versions get a colour each (panel.css has six); the rest share one.
SHOWN_VERSIONS = 6


@dataclass(frozen=True, kw_only=True)
class HistoryView:
    what: What
    agent_id: UUID | None = None
    first: date | None = None  # the range's first day, in the platform's zone
    last: date | None = None  # its last day (included)
    before: Position | None = None
    after: Position | None = None
    errors: dict[str, str] = field(default_factory=dict)

    def query(self, org_id: UUID, zone: ZoneInfo, *, limit: int = PAGE_SIZE) -> HistoryQuery:
        return HistoryQuery(
            org_id=org_id,
            agent_id=self.agent_id,
            days=DayRange(zone=zone, first=self.first, last=self.last)
            if self.first or self.last
            else None,
            before=self.before,
            after=self.after,
            limit=limit,
        )

    def filters(self) -> dict[str, str]:
        """The view's filters as URL parameters (its position left out)."""
        values = {
            "agent": str(self.agent_id) if self.agent_id else "",
            "from": self.first.isoformat() if self.first else "",
            "to": self.last.isoformat() if self.last else "",
        }
        return {name: value for name, value in values.items() if value}

    def link(self, *, older: Position | None = None, newer: Position | None = None) -> str:
        """This view's page at another position, its filters kept."""
        values = self.filters()
        if older is not None:
            values["before"] = encode_position(older)
        if newer is not None:
            values["after"] = encode_position(newer)
        return f"{self.what}?{urlencode(values)}" if values else self.what

    def export_link(self) -> str:
        return f"{self.what}.csv?{urlencode(self.filters())}"


def encode_position(position: Position) -> str:
    micros = (position.at - _EPOCH) // timedelta(microseconds=1)
    return f"{micros}.{position.id}"


def decode_position(what: What, text: str) -> Position | None:
    """The position in `text`, or None when it is not one this page writes."""
    micros_text, _, key = text.partition(".")
    micros = whole_number(micros_text)
    event_id = None if what == "runs" else whole_number(key)
    if micros is None or (what == "events" and event_id is None):
        return None
    try:
        at = _EPOCH + timedelta(microseconds=micros)
        return Position(at=at, id=UUID(key) if event_id is None else event_id)
    except (ValueError, OverflowError):
        return None


def _day(text: str) -> date | None:
    try:
        return date.fromisoformat(text) if len(text) == 10 else None
    except ValueError:
        return None


def read_view(lang: Language, what: What, params: QueryParams) -> HistoryView:
    """The view the URL names; each field it cannot read gets its error (the field stays empty).
    A day given twice with two values is one it cannot read: showing either would be a guess."""
    errors: dict[str, str] = {}
    agent_id: UUID | None = None
    if params.get("agent"):
        try:
            agent_id = UUID(params["agent"][:40])
        except ValueError:
            errors["agent"] = lang.gettext("This agent could not be found.")
    days: dict[str, date | None] = {}
    twice = given_twice(params.multi_items())
    for name in ("from", "to"):
        text = params.get(name, "")[:40]
        days[name] = _day(text) if text else None
        if text and days[name] is None:
            errors[name] = lang.gettext(
                "“%(value)s” is not a date (expected YYYY-MM-DD).", value=shown(text)
            )
        if name in twice:
            days[name] = None
            errors[name] = two_values(lang, name, *twice[name])
    if days["from"] and days["to"] and days["to"] < days["from"]:
        errors["to"] = lang.gettext("The last day is before the first day.")
    positions: dict[str, Position | None] = {}
    for name in ("before", "after"):
        text = params.get(name, "")[:80]
        positions[name] = decode_position(what, text) if text else None
        if text and positions[name] is None:
            errors[name] = lang.gettext("This page could not be found; here is the newest.")
    if positions["before"] and positions["after"]:
        positions["after"] = None
    return HistoryView(
        what=what,
        agent_id=agent_id,
        first=days["from"],
        last=days["to"],
        before=positions["before"],
        after=positions["after"],
        errors=errors,
    )


def without_errors(view: HistoryView) -> HistoryView:
    """The view with only the fields that were read (a page can still be shown)."""
    return replace(view, errors={})


# The export: one line per row, the columns documented in the panel's docs. A new column goes
# last: a spreadsheet or script that reads the file by position keeps reading what it read.
RUN_COLUMNS = (
    "time_utc",
    "agent_id",
    "agent_name",
    "trigger",
    "slot_utc",
    "status",
    "from_version",
    "version",
    "reason",
    "miss_reason",
    "skip_reason",
    "error",
    "run_id",
    "stopped_by",
)
EVENT_COLUMNS = (
    "time_utc",
    "agent_id",
    "agent_name",
    "kind",
    "actor_kind",
    "actor_name",
    "run_id",
    "data",
    "event_id",
)
# A spreadsheet takes a cell starting with one of these as a formula (or, for tab and carriage
# return, as the start of one): such a cell is written with a leading apostrophe.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> str:
    """`value` as a CSV cell a spreadsheet shows as text, never runs as a formula."""
    if value is None:
        return ""
    text = value.isoformat() if isinstance(value, datetime) else str(value)
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


def _utc(instant: datetime | None) -> str | None:
    return instant.astimezone(UTC).isoformat() if instant else None


def _lines(header: Sequence[str], rows: Iterable[Sequence[object]]) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow([csv_cell(value) for value in row])
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    # A range without a row is still a file with its header.
    if buffer.tell():
        yield buffer.getvalue()


def run_lines(runs: Iterable[HistoryRun]) -> Iterator[str]:
    return _lines(
        RUN_COLUMNS,
        (
            (
                _utc(r.run.created_at),
                r.run.agent_id,
                r.agent_name,
                r.run.trigger,
                _utc(r.run.slot_at),
                r.run.status,
                r.run.from_version,
                r.run.version,
                str(r.run.reason) if r.run.reason else None,
                str(r.run.miss_reason) if r.run.miss_reason else None,
                r.run.skip_reason,
                r.run.error,
                r.run.run_id,
                r.run.stopped_by,
            )
            for r in runs
        ),
    )


def event_lines(events: Iterable[HistoryEvent]) -> Iterator[str]:
    return _lines(
        EVENT_COLUMNS,
        (
            (
                _utc(e.event.at),
                e.agent_id,
                e.agent_name,
                e.event.kind,
                e.event.actor.kind,
                e.event.actor.name,
                e.event.run_id,
                json.dumps(e.event.data, sort_keys=True, ensure_ascii=False),
                e.event.id,
            )
            for e in events
        ),
    )


def versions_chart(lang: Language, nights: Sequence[NightVersions]) -> Markup:
    """One column per night, stacked by version (the most common ones each their colour)."""
    totals: dict[str, int] = {}
    for night in nights:
        for version, agents in night.agents.items():
            totals[version] = totals.get(version, 0) + agents
    shown = sorted(totals, key=lambda version: (-totals[version], version))[:SHOWN_VERSIONS]
    others = len(totals) > len(shown)
    series = [
        Series(legend=version, css=f"chart-version-{index}") for index, version in enumerate(shown)
    ]
    if others:
        series.append(Series(legend=lang.gettext("other versions"), css="chart-version-other"))
    stacks = []
    for night in nights:
        parts = [night.agents.get(version, 0) for version in shown]
        if others:
            parts.append(sum(n for v, n in night.agents.items() if v not in shown))
        stacks.append(Stack(label=lang.day(night.night), parts=tuple(parts)))
    return stacked_chart(
        stacks if totals else [],
        series=series,
        title=lang.gettext("Agents per version at the end of each night"),
        empty_text=lang.gettext("No agent reported a version in these nights."),
        number=lambda n: lang.number(n),
    )
