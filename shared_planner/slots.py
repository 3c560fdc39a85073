"""Which slot is due: candidate slots from local calendar days, kept and ordered by instant.

A slot is one scheduled wall time on one local calendar day, resolved to the instant it runs at
(`wall_clock`). Candidates come from whole local calendar dates on both sides of the dates that
the instants of interest show (two days back and two ahead, stepped as dates, never by adding 24
hours), because around a transition at midnight the date a slot is labelled with and the date the
clock shows when it runs can differ in either direction, by up to a whole day (Pacific/Apia
skipped 2011-12-30). They are compared and ordered by instant, never by label: in a spring gap
02:30 runs at 03:30 CEST, after 03:10. Labels that land on one instant are one slot (it runs once),
keyed by the wall time the clock really shows then when one of them does.

Each (zone, day, grid point) is resolved once and kept, so a control plane checking thousands of
agents at one moment resolves each wall time once, not once per agent. The cache is of a pure
function: it changes how fast an answer comes, never the answer.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from ground.limits import DEFAULT_CATCH_UP_MINUTES, FIRST_YEAR, LAST_YEAR, MAX_CATCH_UP_MINUTES
from shared_planner.errors import InvalidPlanningInput
from shared_planner.patterns import GRID_MINUTES, MAX_TIMES
from shared_planner.schedule import grid_index, parse_times
from shared_planner.wall_clock import (
    WallTime,
    describe_wall_time,
    local_instant,
    require_aware,
    zone_of,
)

__all__ = [
    "DEFAULT_CATCH_UP",
    "MAX_CATCH_UP",
    "PlannedSlot",
    "Slot",
    "due_slot",
    "latest_closed_slot",
    "next_slot",
    "parse_slot_key",
    "plan_slots",
    "slot_for_key",
    "slot_key",
    "slots_between",
    "slots_on_day",
]

DEFAULT_CATCH_UP = timedelta(minutes=DEFAULT_CATCH_UP_MINUTES)
MAX_CATCH_UP = timedelta(minutes=MAX_CATCH_UP_MINUTES)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NAIVE_EPOCH = datetime(1970, 1, 1)
_SECOND = timedelta(seconds=1)
_GRID_SECONDS = GRID_MINUTES * 60
# Minus the lowest UTC offset any zone has used since 1900 (-12:00, Kwajalein until 1993): no
# wall time runs later than this after the same reading taken as UTC.
_LOWEST_OFFSET_SECONDS = 12 * 3600
# Dates walked beyond those the range's ends show. One transition moves a clock by at most a day
# (Apia's 2011 jump, the largest in the zone database), so one day each way suffices; two keeps
# the rule "at least two days back" with room to spare.
_MARGIN_DAYS = 2
# next_slot looks this far ahead at a time; every day that exists holds every scheduled time.
_LOOKAHEAD_DAYS = 3


def slot_key(day: date, wall: time) -> str:
    """The slot's name: local date and wall time as scheduled, `YYYY-MM-DDTHH:MM`."""
    return f"{day.isoformat()}T{wall.hour:02d}:{wall.minute:02d}"


_SLOT_KEY_LENGTH = len("2026-11-30T03:00")


def parse_slot_key(key: object, *, field: str = "slot_key") -> tuple[date, time]:
    """The local date and wall time a slot key names, or `InvalidPlanningInput` saying why.

    Strict: exactly `YYYY-MM-DDTHH:MM` as `slot_key` writes it (ASCII digits, zero-padded), a real
    date in the planner's years and a real time; any other spelling of the same moment is not a key.
    """
    if not isinstance(key, str) or len(key) != _SLOT_KEY_LENGTH or not key.isascii():
        raise InvalidPlanningInput(
            f"{field}: {_shown(key)} is not a slot key (expected YYYY-MM-DDTHH:MM)"
        )
    digits = key[0:4] + key[5:7] + key[8:10] + key[11:13] + key[14:16]
    if (key[4], key[7], key[10], key[13]) != ("-", "-", "T", ":") or not digits.isdigit():
        raise InvalidPlanningInput(
            f"{field}: {key!r} is not a slot key (expected YYYY-MM-DDTHH:MM)"
        )
    try:
        day = date(int(key[0:4]), int(key[5:7]), int(key[8:10]))
        wall = time(int(key[11:13]), int(key[14:16]))
    except ValueError as exc:
        raise InvalidPlanningInput(f"{field}: {key!r} is not a real date and time") from exc
    if not FIRST_YEAR <= day.year <= LAST_YEAR:
        raise InvalidPlanningInput(
            f"{field}: {key!r} is out of range "
            f"(expected a date in the years {FIRST_YEAR} to {LAST_YEAR})"
        )
    return day, wall


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass(frozen=True, kw_only=True)
class Slot:
    """One run of the schedule: `wall` on local `day`, happening at the aware UTC instant `at`."""

    key: str
    day: date
    wall: time
    at: datetime

    def __post_init__(self) -> None:
        if self.at.tzinfo is None:
            raise InvalidPlanningInput(f"at: {self.at.isoformat()!r} has no time zone")
        expected = slot_key(self.day, self.wall)
        if self.key != expected:
            raise InvalidPlanningInput(
                f"key: {self.key!r} does not match day and wall (expected {expected!r})"
            )

    def window_closes(self, catch_up: timedelta) -> datetime:
        """The instant this slot's catch-up window closes: the first instant it may not start.

        The one place the window's end is computed; the agent, the claim check, the run's
        authority and the reconcile passes all ask it.
        """
        return self.at + catch_up


def latest_closed_slot(until: datetime, catch_up: timedelta) -> datetime:
    """The latest slot instant whose catch-up window has closed by `until`.

    `Slot.window_closes` turned around, for a query over many slots at once: a slot's window
    has closed by `until` exactly when the slot is at or before this instant.
    """
    return until - catch_up


@dataclass(frozen=True, kw_only=True)
class PlannedSlot:
    """A slot with every scheduled wall time that runs at its instant and why (for previews)."""

    slot: Slot
    merged: tuple[WallTime, ...]


class _Day:
    """The instants of one local day's grid points in one zone, resolved as they are first asked
    for and then kept (Unix seconds, by grid index).

    `earliest` is exact: with the fold=0 rule, instants rise through the day except for a drop at
    the end of a gap, which lands on a value already reached, so the day's 00:00 comes first.
    `latest_bound` is only a bound, from the fact that no UTC offset since 1900 is below -12:00.
    Filling an entry twice from two threads is harmless: both write the same number.
    """

    __slots__ = ("_midnight", "_zone", "earliest", "instants", "latest_bound")

    def __init__(self, zone: ZoneInfo, ordinal: int) -> None:
        self._zone = zone
        self._midnight = datetime.combine(date.fromordinal(ordinal), time())
        self.instants: list[int | None] = [None] * MAX_TIMES
        self.earliest = self.fill(0)
        naive_last = (self._midnight - _NAIVE_EPOCH) // _SECOND + (MAX_TIMES - 1) * _GRID_SECONDS
        self.latest_bound = naive_last + _LOWEST_OFFSET_SECONDS

    def fill(self, index: int) -> int:
        local = self._midnight + timedelta(seconds=index * _GRID_SECONDS)
        at = (local_instant(local, self._zone) - _EPOCH) // _SECOND
        self.instants[index] = at
        return at


@functools.lru_cache(maxsize=2048)
def _day(zone: ZoneInfo, ordinal: int) -> _Day:
    return _Day(zone, ordinal)


@functools.lru_cache(maxsize=4096)
def _cached_indices(times: tuple[object, ...]) -> tuple[int, ...]:
    return tuple(grid_index(wall) for wall in parse_times(times))


def _indices(times: Sequence[time | str]) -> tuple[int, ...]:
    if isinstance(times, str | bytes) or not isinstance(times, Sequence):
        parse_times(times)  # raises "is not a list of times", naming the value
    entries = tuple(times)
    try:
        hash(entries)
    except TypeError:  # an unhashable entry (a dict from JSON): parse uncached, which names it
        return tuple(grid_index(wall) for wall in parse_times(entries))
    return _cached_indices(entries)


def _floor_seconds(instant: datetime) -> int:
    return (instant - _EPOCH) // _SECOND


def _ceil_seconds(instant: datetime) -> int:
    return -((_EPOCH - instant) // _SECOND)


def _local_ordinal(seconds: int, zone: ZoneInfo) -> int:
    return datetime.fromtimestamp(seconds, zone).toordinal()


def _at(seconds: int) -> datetime:
    return _EPOCH + timedelta(seconds=seconds)


def _candidates(
    indices: tuple[int, ...], zone: ZoneInfo, first: int, last: int
) -> Iterator[tuple[int, int, int]]:
    """(instant, day ordinal, grid index) of every label with first <= instant <= last (seconds)."""
    for ordinal in range(
        _local_ordinal(first, zone) - _MARGIN_DAYS, _local_ordinal(last, zone) + _MARGIN_DAYS + 1
    ):
        day = _day(zone, ordinal)
        if day.earliest > last or day.latest_bound < first:
            continue
        instants = day.instants
        for index in indices:
            at = instants[index]
            if at is None:
                at = day.fill(index)
            if first <= at <= last:
                yield at, ordinal, index


def _make_slot(at: int, labels: list[tuple[int, int]], zone: ZoneInfo) -> Slot:
    """One slot for every label on one instant, named by the label the clock shows, if any."""
    if len(labels) == 1:
        ordinal, index = labels[0]
    else:
        shown = datetime.fromtimestamp(at, zone)
        showing = (shown.toordinal(), (shown.hour * 60 + shown.minute) // GRID_MINUTES)
        on_grid = shown.second == 0 and shown.minute % GRID_MINUTES == 0
        ordinal, index = showing if on_grid and showing in labels else min(labels)
    wall = _wall(index)
    day = date.fromordinal(ordinal)
    return Slot(key=slot_key(day, wall), day=day, wall=wall, at=_at(at))


def _check_catch_up(catch_up: object) -> timedelta:
    if not isinstance(catch_up, timedelta):
        raise InvalidPlanningInput(
            f"catch_up: {catch_up!r} is not a timedelta (expected e.g. timedelta(minutes=15))"
        )
    if not timedelta(0) < catch_up <= MAX_CATCH_UP:
        raise InvalidPlanningInput(
            f"catch_up: {catch_up} is out of range "
            f"(expected more than 0 and at most {MAX_CATCH_UP_MINUTES} minutes)"
        )
    return catch_up


def due_slot(
    times: Sequence[time | str],
    *,
    now: datetime,
    tz: str | ZoneInfo,
    last_consumed: datetime | None = None,
    catch_up: timedelta = DEFAULT_CATCH_UP,
) -> Slot | None:
    """The latest slot with `at <= now < at + catch_up` and `at > last_consumed`, or None.

    When several slots are open the latest is due; consuming it supersedes the earlier ones,
    which `last_consumed` then expresses.
    """
    now_utc = require_aware(now, field="now")
    window = _check_catch_up(catch_up)
    zone = zone_of(tz)
    indices = _indices(times)
    last = _floor_seconds(now_utc)
    first = _floor_seconds(now_utc - window) + 1
    if last_consumed is not None:
        first = max(first, _floor_seconds(require_aware(last_consumed, field="last_consumed")) + 1)
    if first > last:
        return None
    # Every candidate is at or after `first`, which may be below zero (an instant before 1970).
    best = first - 1
    labels: list[tuple[int, int]] = []
    for at, ordinal, index in _candidates(indices, zone, first, last):
        if at > best:
            best, labels = at, [(ordinal, index)]
        elif at == best:
            labels.append((ordinal, index))
    return _make_slot(best, labels, zone) if labels else None


def _grouped(
    indices: tuple[int, ...], zone: ZoneInfo, first: int, last: int
) -> list[tuple[int, list[tuple[int, int]]]]:
    by_instant: dict[int, list[tuple[int, int]]] = {}
    for at, ordinal, index in _candidates(indices, zone, first, last):
        by_instant.setdefault(at, []).append((ordinal, index))
    return sorted(by_instant.items())


def _check_range(start: datetime, end: datetime) -> tuple[int, int] | None:
    start_utc = require_aware(start, field="start")
    end_utc = require_aware(end, field="end")
    if end_utc < start_utc:
        raise InvalidPlanningInput(
            f"end: {end_utc.isoformat()} is before start {start_utc.isoformat()} "
            "(expected start <= end)"
        )
    first, last = _ceil_seconds(start_utc), _ceil_seconds(end_utc) - 1
    return (first, last) if first <= last else None


def slots_between(
    times: Sequence[time | str], *, start: datetime, end: datetime, tz: str | ZoneInfo
) -> list[Slot]:
    """Every slot with `start <= at < end`, ordered by `at`, one per instant."""
    return [planned.slot for planned in plan_slots(times, start=start, end=end, tz=tz)]


def plan_slots(
    times: Sequence[time | str], *, start: datetime, end: datetime, tz: str | ZoneInfo
) -> list[PlannedSlot]:
    """`slots_between`, with the scheduled wall times behind each slot and what happened to them."""
    bounds = _check_range(start, end)
    zone = zone_of(tz)
    indices = _indices(times)
    if bounds is None:
        return []
    planned = []
    for at, labels in _grouped(indices, zone, *bounds):
        slot = _make_slot(at, labels, zone)
        merged = tuple(
            describe_wall_time(date.fromordinal(ordinal), _wall(index), zone)
            for ordinal, index in sorted(labels)
        )
        planned.append(PlannedSlot(slot=slot, merged=merged))
    return planned


def _day_span(day: date) -> tuple[datetime, datetime]:
    """UTC instants that surely hold every slot labelled with local `day`, in any zone.

    A label runs within a day of its date's UTC midnight (offsets stay within ±14 h, and one
    transition moves a clock by at most a day), so the margin of `_MARGIN_DAYS` on each side is
    more than enough; the slots are then chosen by their label, never by this range.
    """
    midnight = datetime.combine(day, time(), tzinfo=UTC)
    return (
        midnight - timedelta(days=_MARGIN_DAYS),
        midnight + timedelta(days=_MARGIN_DAYS + 1),
    )


def slots_on_day(times: Sequence[time | str], day: date, *, tz: str | ZoneInfo) -> list[Slot]:
    """The slots named with local date `day` (their key's date), ordered by instant.

    Two wall times that land on one instant are one slot (it runs once), so a day may have
    fewer slots than times; a slot merged across midnight belongs to the day its key names.
    """
    if not isinstance(day, date) or isinstance(day, datetime):
        raise InvalidPlanningInput(f"day: {day!r} is not a date (expected e.g. date(2027, 3, 28))")
    start, end = _day_span(day)
    return [slot for slot in slots_between(times, start=start, end=end, tz=tz) if slot.day == day]


def slot_for_key(times: Sequence[time | str], key: object, *, tz: str | ZoneInfo) -> Slot | None:
    """The slot of this schedule that `key` names, or None when the schedule has no such slot.

    A malformed key raises `InvalidPlanningInput` (`parse_slot_key`). A wall time merged into
    another slot on its instant has no slot of its own: its key finds nothing.
    """
    day, _ = parse_slot_key(key)
    return next((slot for slot in slots_on_day(times, day, tz=tz) if slot.key == key), None)


def _wall(index: int) -> time:
    minutes = index * GRID_MINUTES
    return time(minutes // 60, minutes % 60)


def next_slot(times: Sequence[time | str], *, after: datetime, tz: str | ZoneInfo) -> Slot:
    """The first slot with `at > after`."""
    after_utc = require_aware(after, field="after")
    zone = zone_of(tz)
    indices = _indices(times)
    first = _floor_seconds(after_utc) + 1
    span = _LOOKAHEAD_DAYS * 86_400
    # A non-empty schedule runs every day that exists, so the first window nearly always holds
    # the answer; the loop only guards against a zone skipping more than the window.
    for _ in range(10):
        groups = _grouped(indices, zone, first, first + span - 1)
        if groups:
            return _make_slot(*groups[0], zone)
        first += span
    raise AssertionError(f"no slot within {10 * _LOOKAHEAD_DAYS} days after {after_utc}")
