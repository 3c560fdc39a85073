"""The API's schedule validator: the first of the two layers that hold a
schedule's times to one pattern (the database's CHECK is the second).

The rules themselves are `shared_planner.parse_times` (the same pattern the database's CHECK
constraint is built from); this module only turns its refusal into the panel's 422.
"""

from __future__ import annotations

from dataclasses import dataclass

from control_plane.errors import InvalidInput
from shared_planner import InvalidSchedule, parse_times
from shared_planner.schedule import format_time

__all__ = ["Schedule", "validated_schedule"]


@dataclass(frozen=True, kw_only=True)
class Schedule:
    enabled: bool
    times: tuple[str, ...]


def validated_schedule(*, enabled: object, times: object) -> Schedule:
    """A schedule as the database stores it (times sorted), or InvalidInput naming the bad value.

    An empty list is allowed only when the schedule is off, like the database constraint.
    """
    if not isinstance(enabled, bool):
        raise InvalidInput("enabled", enabled, "is not true or false", code="invalid_schedule")
    if not isinstance(times, list):
        raise InvalidInput(
            "times",
            times,
            'is not a list of times (expected e.g. ["03:00"])',
            code="invalid_schedule",
        )
    if not times and not enabled:
        return Schedule(enabled=False, times=())
    try:
        parsed = parse_times(times)
    except InvalidSchedule as exc:
        raise InvalidInput(
            exc.location(),
            exc.value,
            exc.problem,
            code="invalid_schedule",
            message=exc.message(),
        ) from exc
    return Schedule(enabled=enabled, times=tuple(format_time(wall) for wall in sorted(parsed)))
