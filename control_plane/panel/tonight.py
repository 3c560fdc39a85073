"""Which night the customer's "Tonight" screen is about.

The forecast counts the update slots of one local day (`forecast.org_day`), and a night's slots
belong to the day it ends on: the 03:00 slot of the night from Saturday to Sunday is Sunday's.
Until the morning the night in progress is "tonight" (at 02:30 its 03:00 slot is still to
come); from `MORNING` on it is over, and "tonight" is the coming night, tomorrow's slots (at
09:00 nobody means the night they just slept through). The night before is named and linked as
"last night", whose outcomes are in the history.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

__all__ = ["MORNING", "Tonight", "tonight"]

# The hour, local time, from which the night in progress counts as over.
MORNING = time(6, 0)


@dataclass(frozen=True)
class Tonight:
    # The local day whose slots the screen shows.
    day: date
    # True before `MORNING`: the night is under way and some of its slots may be past.
    in_progress: bool
    # The day before `day`: last night, whose slots have run (or are running, in progress).
    last_night: date
    # The clocks change during `day` in the zone: "forward" (an hour is skipped) or "back".
    clocks: Literal["forward", "back"] | None


def tonight(now: datetime, zone: ZoneInfo) -> Tonight:
    """The night "Tonight" is about at `now` in the platform's `zone`."""
    local = now.astimezone(zone)
    in_progress = local.time() < MORNING
    day = local.date() if in_progress else local.date() + timedelta(days=1)
    return Tonight(
        day=day,
        in_progress=in_progress,
        last_night=day - timedelta(days=1),
        clocks=_clock_change(day, zone),
    )


def _clock_change(day: date, zone: ZoneInfo) -> Literal["forward", "back"] | None:
    """Whether the zone's offset from UTC differs at the end of `day` from its start."""
    start = datetime.combine(day, time(0, 0), tzinfo=zone).utcoffset()
    end = datetime.combine(day + timedelta(days=1), time(0, 0), tzinfo=zone).utcoffset()
    assert start is not None and end is not None
    if end > start:
        return "forward"
    if end < start:
        return "back"
    return None
