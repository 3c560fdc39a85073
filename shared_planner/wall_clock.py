"""Wall clock -> instant: the one place daylight saving is solved.

A wall time on a calendar day is one of three kinds in a zone:

* it shows once on the clock (the usual case);
* it shows twice (the repeated hour in autumn): it runs at the *first* instant, so it runs once;
* it never shows (the skipped hour in spring, or a whole skipped day): it runs shifted forward by
  the length of the gap, so 02:30 in Amsterdam's spring gap runs at 03:30 CEST and is never lost.

That is RFC 5545's and Temporal's "compatible" rule. PEP 495 gives exactly it with `fold=0`: the
offset in force *before* the transition, for a repeated time and for a skipped one alike. The kind
is told apart by round-tripping both folds through UTC.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ground.limits import FIRST_YEAR, LAST_YEAR
from shared_planner.errors import InvalidPlanningInput, InvalidTimeZone

__all__ = [
    "WallTime",
    "WallTimeKind",
    "describe_wall_time",
    "local_instant",
    "require_aware",
    "resolve_wall_time",
    "zone_of",
]


def zone_of(tz: str | ZoneInfo, *, field: str = "tz") -> ZoneInfo:
    """The zone for a name (or the zone itself); an unknown name raises `InvalidTimeZone`."""
    if isinstance(tz, ZoneInfo):
        return tz
    if not isinstance(tz, str) or not tz:
        raise InvalidTimeZone(tz, field=field)
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        # ValueError: a key such as "../etc/passwd"; OSError: an unreadable zone file.
        raise InvalidTimeZone(tz, field=field) from exc


def _check_year(value: date, *, field: str) -> None:
    if not FIRST_YEAR <= value.year <= LAST_YEAR:
        raise InvalidPlanningInput(
            f"{field}: {value.isoformat()!r} is out of range "
            f"(expected a date in the years {FIRST_YEAR} to {LAST_YEAR})"
        )


def require_aware(value: object, *, field: str) -> datetime:
    """`value` as an aware UTC datetime; a naive one (or a non-datetime) is refused by name."""
    if not isinstance(value, datetime):
        raise InvalidPlanningInput(
            f"{field}: {value!r} is not a datetime (expected an aware UTC instant)"
        )
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidPlanningInput(
            f"{field}: {value.isoformat()!r} has no time zone "
            "(expected an aware instant, e.g. datetime.now(UTC))"
        )
    _check_year(value, field=field)
    return value.astimezone(UTC)


def _check_wall(day: object, wall: object) -> None:
    if not isinstance(day, date) or isinstance(day, datetime):
        raise InvalidPlanningInput(f"day: {day!r} is not a date (expected e.g. date(2027, 3, 28))")
    if not isinstance(wall, time):
        raise InvalidPlanningInput(f"wall: {wall!r} is not a time (expected e.g. time(2, 30))")
    if wall.tzinfo is not None:
        raise InvalidPlanningInput(
            f"wall: {wall.isoformat()!r} carries a time zone (expected a wall-clock time; "
            "the zone is given separately)"
        )
    _check_year(day, field="day")


def local_instant(local: datetime, zone: ZoneInfo) -> datetime:
    """The rule itself, unchecked: the naive local reading `local` in `zone` -> aware UTC.

    fold=0 picks the offset in force before a transition, which is "first instant" for a repeated
    time and "shifted forward by the gap" for a skipped one; a caller's fold=1 must not leak in.
    `resolve_wall_time` checks its arguments and calls this; the planner's cached fast path calls
    it directly for every grid point it resolves. Nothing else turns wall-clock time into instants.
    """
    return local.replace(tzinfo=zone, fold=0).astimezone(UTC)


def resolve_wall_time(day: date, wall: time, tz: str | ZoneInfo) -> datetime:
    """The aware UTC instant at which `wall` on `day` happens in `tz`.

    Ambiguous (shows twice) -> the first instant; non-existent (skipped) -> shifted forward by the
    gap (`local_instant`).
    """
    _check_wall(day, wall)
    return local_instant(datetime.combine(day, wall), zone_of(tz))


class WallTimeKind(enum.Enum):
    SHOWN_ONCE = "shown_once"
    REPEATED = "repeated"  # the clock shows it twice; it runs at the first
    SKIPPED = "skipped"  # the clock never shows it; it runs shifted forward by the gap


@dataclass(frozen=True, kw_only=True)
class WallTime:
    """What happens to one wall time on one day: its kind, the instant it runs at, and what the
    clock shows at that instant (differs from the wall time only when it was skipped)."""

    day: date
    wall: time
    kind: WallTimeKind
    at: datetime
    shown: datetime  # aware, in the zone: the local reading at `at`
    shift: timedelta  # how far forward a skipped time moved; zero otherwise


def describe_wall_time(day: date, wall: time, tz: str | ZoneInfo) -> WallTime:
    """`resolve_wall_time` plus the reason: shown once, repeated, or skipped (and by how much)."""
    at = resolve_wall_time(day, wall, tz)
    zone = zone_of(tz)
    naive = datetime.combine(day, wall.replace(fold=0))
    first = naive.replace(tzinfo=zone, fold=0)
    second = naive.replace(tzinfo=zone, fold=1)

    def round_trips(local: datetime) -> bool:
        return local.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == naive

    shows_first, shows_second = round_trips(first), round_trips(second)
    if not (shows_first or shows_second):
        kind = WallTimeKind.SKIPPED
    elif shows_first and shows_second and first.utcoffset() != second.utcoffset():
        kind = WallTimeKind.REPEATED
    else:
        kind = WallTimeKind.SHOWN_ONCE
    shown = at.astimezone(zone)
    shift = shown.replace(tzinfo=None) - naive if kind is WallTimeKind.SKIPPED else timedelta(0)
    return WallTime(day=day, wall=wall, kind=kind, at=at, shown=shown, shift=shift)
