"""A schedule's list of times: the parse every layer shares."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import time

from shared_planner.errors import InvalidSchedule
from shared_planner.patterns import CLOCK_TIME_RE, GRID_MINUTES, MAX_TIMES, TIME_RE

__all__ = ["format_time", "grid_index", "parse_times", "schedule_error"]

_EXAMPLE = "use HH:MM, e.g. 03:05"


def format_time(wall: time) -> str:
    """The schedule spelling of a wall time: `HH:MM`."""
    return f"{wall.hour:02d}:{wall.minute:02d}"


def grid_index(wall: time) -> int:
    """Position of a grid wall time in the day: 00:00 -> 0, 00:05 -> 1, ... 23:55 -> 287."""
    return (wall.hour * 60 + wall.minute) // GRID_MINUTES


def _parse_one(index: int, value: object) -> time:
    if isinstance(value, time):
        # Already parsed (the agent keeps its schedule as times); the same rules still hold.
        if value.tzinfo is not None:
            raise InvalidSchedule(
                index=index, value=str(value), problem=f"carries a time zone ({_EXAMPLE})"
            )
        if value.second or value.microsecond or value.minute % GRID_MINUTES:
            raise InvalidSchedule(
                index=index,
                value=value.isoformat(),
                problem=f"is not on the five-minute grid ({_EXAMPLE})",
            )
        return value.replace(fold=0)
    if not isinstance(value, str):
        raise InvalidSchedule(index=index, value=value, problem=f"is not a string ({_EXAMPLE})")
    if TIME_RE.fullmatch(value):
        return time(int(value[:2]), int(value[3:]))
    if CLOCK_TIME_RE.fullmatch(value):
        raise InvalidSchedule(
            index=index, value=value, problem=f"is not on the five-minute grid ({_EXAMPLE})"
        )
    raise InvalidSchedule(
        index=index, value=value, problem=f"is not a 24-hour time of day ({_EXAMPLE})"
    )


def parse_times(values: Sequence[object]) -> tuple[time, ...]:
    """Parse a schedule's times, keeping their order.

    Raises `InvalidSchedule` naming the index and the value for a non-string, a string that is not
    `HH:MM` on the five-minute grid, a duplicate, an empty list or more than `MAX_TIMES` entries.
    A single string, a mapping or a set is refused rather than read as a list of its characters,
    keys or members in no particular order. Already parsed `time` values are accepted and held to
    the same rules.
    """
    return _parse(values)


def _parse(values: object) -> tuple[time, ...]:
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise InvalidSchedule(
            index=None, value=values, problem='is not a list of times (expected e.g. ["03:00"])'
        )
    entries = list(values)
    if not entries:
        raise InvalidSchedule(
            index=None,
            value=entries,
            problem='is empty (an enabled schedule needs at least one time, e.g. ["03:00"])',
        )
    if len(entries) > MAX_TIMES:
        raise InvalidSchedule(
            index=None,
            value=f"{len(entries)} entries",
            problem=f"are more than the {MAX_TIMES} five-minute slots in a day",
        )
    parsed: list[time] = []
    first_seen: dict[time, int] = {}
    for index, value in enumerate(entries):
        wall = _parse_one(index, value)
        if wall in first_seen:
            raise InvalidSchedule(
                index=index,
                value=value if isinstance(value, str) else format_time(wall),
                problem="repeats an earlier entry (each time may appear once)",
                repeats=first_seen[wall],
            )
        first_seen[wall] = index
        parsed.append(wall)
    return tuple(parsed)


def schedule_error(values: object, *, field: str = "times") -> str | None:
    """The customer-facing message for a bad schedule value, or None when it is valid.

    For an API validator: `schedule_error(body["times"], field="schedule.times")` gives e.g.
    `schedule.times[1]: '03:07' is not on the five-minute grid (use HH:MM, e.g. 03:05)`.
    """
    try:
        _parse(values)
    except InvalidSchedule as exc:
        return exc.message(field)
    return None
