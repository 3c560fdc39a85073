"""`nachtwacht plan`: a readable preview of a schedule's slots, with daylight-saving notes.

    nachtwacht plan --times 02:30,23:55 --tz Europe/Amsterdam --from 2027-03-27 --days 3

prints every slot of those local days with its local and UTC time and, where daylight saving moved
or merged it, a plain note. `--now` adds which slot is due at that instant and which comes next.
Bad input prints one line naming the option and the value, and exits 2.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, date, datetime, time, timedelta
from typing import NoReturn
from zoneinfo import ZoneInfo

from ground.clock import clock_from_env
from ground.instants import InstantError, parse_day_text, parse_written_time
from ground.limits import FIRST_YEAR, LAST_YEAR
from shared_planner import (
    DEFAULT_CATCH_UP,
    MAX_CATCH_UP,
    InvalidSchedule,
    PlannedSlot,
    PlannerError,
    WallTime,
    WallTimeKind,
    due_slot,
    format_time,
    next_slot,
    parse_times,
    plan_slots,
    resolve_wall_time,
    zone_of,
)

__all__ = ["main", "render_plan"]

DEFAULT_TZ = "Europe/Amsterdam"  # the platform's default zone
MAX_DAYS = 366


class UsageError(Exception):
    """Bad command-line input; the message is the one line the user sees."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="nachtwacht plan",
        description="Preview an update schedule: every slot with its local and UTC time, and "
        "plain notes where daylight saving moves or merges a slot.",
    )
    parser.add_argument(
        "--times", default="03:00", help="comma-separated HH:MM times (default: 03:00)"
    )
    parser.add_argument(
        "--tz", default=DEFAULT_TZ, help=f"IANA time zone of the schedule (default: {DEFAULT_TZ})"
    )
    parser.add_argument(
        "--from",
        dest="first_day",
        metavar="YYYY-MM-DD",
        help="first local day to show (default: today in --tz, by the program's clock)",
    )
    parser.add_argument(
        "--days", default="3", help=f"how many days to show, 1-{MAX_DAYS} (default: 3)"
    )
    parser.add_argument(
        "--now",
        metavar="INSTANT",
        help="also say which slot is due at this instant (ISO 8601, e.g. 2027-03-28T01:35Z)",
    )
    parser.add_argument(
        "--catch-up",
        default=str(int(DEFAULT_CATCH_UP / timedelta(minutes=1))),
        metavar="MINUTES",
        help="catch-up window for --now, in minutes (default: 15)",
    )
    return parser


def _times(raw: str) -> tuple[time, ...]:
    try:
        return parse_times([part.strip() for part in raw.split(",")])
    except InvalidSchedule as exc:
        raise UsageError(exc.message("--times")) from exc


def _zone(raw: str) -> ZoneInfo:
    try:
        return zone_of(raw, field="--tz")
    except PlannerError as exc:
        raise UsageError(str(exc)) from exc


def _first_day(raw: str | None, zone: ZoneInfo) -> date:
    if raw is None:
        clock = clock_from_env()
        if clock.is_fake:
            print(clock.describe(), file=sys.stderr)
        return clock.now().astimezone(zone).date()
    try:
        return parse_day_text(raw)
    except ValueError as exc:
        raise UsageError(
            f"--from: {raw!r} is not a date (expected YYYY-MM-DD, e.g. 2027-03-27)"
        ) from exc


def _check_years(option: str, value: date, shown: str) -> None:
    # The last planner year is kept free: the walk looks at dates around the ones shown.
    if not FIRST_YEAR <= value.year < LAST_YEAR:
        raise UsageError(
            f"{option}: {shown!r} is out of range "
            f"(expected a date in the years {FIRST_YEAR} to {LAST_YEAR - 1})"
        )


def _bounded_int(raw: str, *, option: str, low: int, high: int, unit: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise UsageError(f"{option}: {raw!r} is not a whole number of {unit} from {low} to {high}")
    return value


def _instant(raw: str) -> datetime:
    try:
        value = parse_written_time(raw)
    except InstantError as exc:
        raise UsageError(f"--now: {raw!r} has no offset (expected e.g. 2027-03-28T01:35Z)") from exc
    except ValueError as exc:
        raise UsageError(
            f"--now: {raw!r} is not an ISO 8601 instant (expected e.g. 2027-03-28T01:35Z)"
        ) from exc
    _check_years("--now", value.date(), raw)
    return value.astimezone(UTC)


def _local(at: datetime, zone: ZoneInfo) -> str:
    shown = at.astimezone(zone)
    return f"{shown:%a %Y-%m-%d %H:%M} {shown.tzname()}"


def _utc(at: datetime) -> str:
    return f"{at.astimezone(UTC):%Y-%m-%d %H:%M}Z"


def _shown_time(wall: WallTime, on_day: date) -> str:
    """The clock reading a wall time ran at, with its date only when that date differs."""
    text = f"{wall.shown:%H:%M} {wall.shown.tzname()}"
    return text if wall.shown.date() == on_day else f"{wall.shown:%Y-%m-%d} {text}"


def _notes(planned: PlannedSlot, zone: ZoneInfo) -> list[str]:
    slot = planned.slot
    notes = []
    for wall in planned.merged:
        name, day = format_time(wall.wall), wall.day.isoformat()
        is_key = (wall.day, wall.wall) == (slot.day, slot.wall)
        if wall.kind is WallTimeKind.SKIPPED and (is_key or len(planned.merged) == 1):
            notes.append(f"{name} does not exist on {day}; runs at {_shown_time(wall, wall.day)}")
        elif wall.kind is WallTimeKind.SKIPPED:
            notes.append(
                f"{name} does not exist on {day}; it falls on {_shown_time(wall, wall.day)}, "
                f"the same instant as {slot.key}: one run for both"
            )
        elif wall.kind is WallTimeKind.REPEATED:
            again = datetime.combine(wall.day, wall.wall, tzinfo=zone).replace(fold=1)
            notes.append(
                f"{name} happens twice on {day} ({wall.shown.tzname()}, then {again.tzname()}); "
                "runs once, at the first"
            )
    return notes


def _day_never_happens(day: date, zone: ZoneInfo) -> bool:
    midnight = resolve_wall_time(day, time(0), zone)
    return midnight == resolve_wall_time(day + timedelta(days=1), time(0), zone)


def render_plan(times: tuple[time, ...], zone: ZoneInfo, first_day: date, days: int) -> list[str]:
    """The preview's lines: a heading, then one line per slot with its notes."""
    start = resolve_wall_time(first_day, time(0), zone)  # refuses a day beyond the planner's years
    last_day = first_day + timedelta(days=days - 1)
    end = resolve_wall_time(last_day + timedelta(days=1), time(0), zone)
    planned = plan_slots(times, start=start, end=end, tz=zone)
    schedule = ", ".join(format_time(wall) for wall in sorted(times))
    span = (
        f"{first_day:%a %Y-%m-%d}"
        if days == 1
        else f"{days} days, {first_day:%a %Y-%m-%d} to {last_day:%a %Y-%m-%d}"
    )
    lines = [
        f"Schedule {schedule} in {zone.key}: {span}",
        "",
        f"{'slot':<18}{'runs at (local)':<28}{'runs at (UTC)':<20}note",
    ]
    for entry in planned:
        notes = _notes(entry, zone) or [""]
        lines.append(
            f"{entry.slot.key:<18}{_local(entry.slot.at, zone):<28}{_utc(entry.slot.at):<20}"
            f"{notes[0]}".rstrip()
        )
        lines += [f"{'':<66}{note}" for note in notes[1:]]
    skipped = [
        first_day + timedelta(days=offset)
        for offset in range(days)
        if _day_never_happens(first_day + timedelta(days=offset), zone)
    ]
    if skipped:
        lines.append("")
        lines += [
            f"{day} never happens in {zone.key}: the clock skips the whole day, "
            "so its times run with the next day's"
            for day in skipped
        ]
    return lines


def _render_now(
    times: tuple[time, ...], zone: ZoneInfo, now: datetime, catch_up: timedelta
) -> list[str]:
    due = due_slot(times, now=now, tz=zone, catch_up=catch_up)
    upcoming = next_slot(times, after=now, tz=zone)
    minutes = int(catch_up / timedelta(minutes=1))
    heading = f"At {_utc(now)} ({_local(now, zone)}), catch-up {minutes} minutes:"
    due_line = (
        f"  due:  {due.key}, opened {_utc(due.at)}, open until {_utc(due.at + catch_up)}"
        if due is not None
        else "  due:  nothing"
    )
    return [
        heading,
        due_line,
        f"  next: {upcoming.key}, at {_local(upcoming.at, zone)} ({_utc(upcoming.at)})",
    ]


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
        times = _times(args.times)
        zone = _zone(args.tz)
        days = _bounded_int(args.days, option="--days", low=1, high=MAX_DAYS, unit="days")
        max_minutes = int(MAX_CATCH_UP / timedelta(minutes=1))
        catch_up = timedelta(
            minutes=_bounded_int(
                args.catch_up, option="--catch-up", low=1, high=max_minutes, unit="minutes"
            )
        )
        now = _instant(args.now) if args.now is not None else None
        first_day = _first_day(args.first_day, zone)
        _check_years("--from", first_day, first_day.isoformat())
        if (first_day + timedelta(days=days)).year >= LAST_YEAR:
            raise UsageError(
                f"--days: {days} days from {first_day} run past {LAST_YEAR - 1}-12-31 "
                "(the last day planned)"
            )
        lines = render_plan(times, zone, first_day, days)
        if now is not None:
            lines += ["", *_render_now(times, zone, now, catch_up)]
    except (UsageError, PlannerError) as exc:
        print(f"nachtwacht plan: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0
