"""Which instants the demo's night spans (pure: no clock reads).

The night is "02:50 to 03:30 platform time" on a local date, with the default 03:00 slot in it.
Daylight saving makes that less simple than it sounds, and the demo exists to show it:

- autumn (2026-10-25 in Europe/Amsterdam): 02:50 happens twice; the night starts at the first
  02:50 (CEST), runs through the repeated hour and ends at 03:30 CET — 100 minutes, one 03:00.
- spring (2027-03-28): 02:50 does not exist (02:00-02:59 is skipped), so the night starts ten
  minutes before the 03:00 slot instead, at 01:50 CET, and the clock jumps to 03:00 CEST.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from ground.limits import FIRST_YEAR, LAST_YEAR
from nachtwacht.demo_night.errors import DemoUsageError
from shared_planner import PlannerError, resolve_wall_time

__all__ = ["NIGHT_SLOT", "Night", "local_label", "night_of"]

NIGHT_START = time(2, 50)
NIGHT_SLOT = time(3, 0)
NIGHT_END = time(3, 30)
LEAD_BEFORE_SLOT = timedelta(minutes=10)
# The demo's releases are signed this long before the night begins (their `issued_at`): the
# first instant its clock shows.
SIGNED_BEFORE_NIGHT = timedelta(days=2)


@dataclass(frozen=True, kw_only=True)
class Night:
    day: date
    timezone: str
    start: datetime
    slot_at: datetime
    end: datetime

    @property
    def minutes(self) -> float:
        return (self.end - self.start).total_seconds() / 60

    def label(self, instant: datetime) -> str:
        return local_label(instant, self.timezone)

    def daylight_saving_note(self) -> str | None:
        """A sentence when the zone's offset changes during the night, else None."""
        zone = ZoneInfo(self.timezone)
        before = self.start.astimezone(zone)
        after = self.end.astimezone(zone)
        if before.utcoffset() == after.utcoffset():
            return None
        if (after.utcoffset() or timedelta()) < (before.utcoffset() or timedelta()):
            return (
                f"daylight saving ends tonight: the clock goes from {before.tzname()} to "
                f"{after.tzname()} and shows 02:00-02:59 twice; 03:00 still happens once"
            )
        return (
            f"daylight saving starts tonight: the clock jumps from {before.tzname()} to "
            f"{after.tzname()} and 02:00-02:59 never shows"
        )


def _out_of_range(day: date) -> DemoUsageError:
    return DemoUsageError(
        f"--date: {day.isoformat()!r} is out of range (expected a night in the years "
        f"{FIRST_YEAR + 1} to {LAST_YEAR - 1}; the demo's clock starts two days before it)"
    )


def local_label(instant: datetime, timezone: str) -> str:
    """`03:00 CET` — the wall time a person in the platform's zone sees."""
    shown = instant.astimezone(ZoneInfo(timezone))
    return f"{shown:%H:%M} {shown.tzname()}"


def night_of(day: date, timezone: str) -> Night:
    # The years every clock runs in (ground.limits), with room for the two days before.
    if not FIRST_YEAR < day.year < LAST_YEAR:
        raise _out_of_range(day)
    try:
        slot_at = resolve_wall_time(day, NIGHT_SLOT, timezone)
        start = min(resolve_wall_time(day, NIGHT_START, timezone), slot_at - LEAD_BEFORE_SLOT)
        end = resolve_wall_time(day, NIGHT_END, timezone)
    except PlannerError as exc:
        raise DemoUsageError(f"--date: {day.isoformat()!r} cannot be planned ({exc})") from exc
    first, last = (start - SIGNED_BEFORE_NIGHT).astimezone(UTC), end.astimezone(UTC)
    if not FIRST_YEAR < first.year <= last.year < LAST_YEAR:
        raise _out_of_range(day)
    return Night(
        day=day,
        timezone=timezone,
        start=start.astimezone(UTC),
        slot_at=slot_at.astimezone(UTC),
        end=end.astimezone(UTC),
    )
