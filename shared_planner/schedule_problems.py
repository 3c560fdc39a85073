"""A schedule's problem as facts, for a shell that words it in the reader's language.

`schedule_error` gives the API's English sentence; the panel needs what went wrong, where and with
which value, and says it in Dutch or Polish itself. The rules stay in `parse_times`: this module
only reads the refusal it raises, so there is one copy of them.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from shared_planner.errors import InvalidSchedule
from shared_planner.patterns import CLOCK_TIME_RE, MAX_TIMES
from shared_planner.schedule import parse_times

__all__ = ["ScheduleProblem", "ScheduleProblemKind", "schedule_problem"]


class ScheduleProblemKind(enum.Enum):
    NOT_A_LIST = "not_a_list"
    EMPTY = "empty"  # an enabled schedule without a time
    TOO_MANY = "too_many"  # more than MAX_TIMES entries
    NOT_A_STRING = "not_a_string"
    NOT_A_TIME = "not_a_time"  # not a 24-hour HH:MM time of day
    OFF_GRID = "off_grid"  # a time of day, but not on the five-minute grid
    DUPLICATE = "duplicate"


@dataclass(frozen=True, kw_only=True)
class ScheduleProblem:
    """`index` is the entry at fault (None when the list as a whole is), `value` what it held,
    `repeats` the earlier index a duplicate repeats, `limit` the most entries allowed."""

    kind: ScheduleProblemKind
    index: int | None
    value: object
    repeats: int | None = None
    limit: int = MAX_TIMES


def _kind(exc: InvalidSchedule, values: object) -> ScheduleProblemKind:
    if exc.repeats is not None:
        return ScheduleProblemKind.DUPLICATE
    if exc.index is None:
        if isinstance(values, str | bytes) or not isinstance(values, Sequence):
            return ScheduleProblemKind.NOT_A_LIST
        return ScheduleProblemKind.EMPTY if not values else ScheduleProblemKind.TOO_MANY
    if not isinstance(exc.value, str):
        return ScheduleProblemKind.NOT_A_STRING
    if CLOCK_TIME_RE.fullmatch(exc.value):
        return ScheduleProblemKind.OFF_GRID
    return ScheduleProblemKind.NOT_A_TIME


def schedule_problem(values: object) -> ScheduleProblem | None:
    """The first problem `parse_times` finds in `values`, as facts; None when they are valid."""
    try:
        parse_times(values)  # type: ignore[arg-type]  # any value: refusing it is the point
    except InvalidSchedule as exc:
        value = values if exc.index is None else exc.value
        return ScheduleProblem(
            kind=_kind(exc, values), index=exc.index, value=value, repeats=exc.repeats
        )
    return None
