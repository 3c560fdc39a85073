"""The forecast read from the database: the platform's view and one organisation's."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from datetime import date, datetime
from typing import Any
from uuid import UUID

from control_plane.errors import InvalidInput
from control_plane.forecast.model import (
    OrgDayForecast,
    PlatformDayForecast,
    WaveOutlook,
    org_day_forecast,
    platform_day_forecast,
)
from control_plane.forecast.releases import publish_outlook, read_release_needs, release_nights
from control_plane.forecast.round_bytes import OrgRound, read_next_rounds
from control_plane.rollout.services import (
    RolloutOverview,
    rollout_overview,
)
from control_plane.settings.services import read_settings
from control_plane.types import Connection, Pool
from ground.instants import parse_day_text
from ground.limits import FIRST_YEAR, LAST_YEAR

__all__ = ["DAY_PATTERN", "ForecastService", "parse_day", "read_scheduled_agents"]


# The one declaration of a forecast's day: `parse_day` holds a value to it, and the routes state
# it in the OpenAPI (with `format: date`, which also rules out a day the calendar lacks). The
# years are the planner's but its first and last: a day's forecast walks the days around it
# (1901 to 8998; a test ties the pattern to FIRST_YEAR and LAST_YEAR).
DAY_PATTERN = (
    r"^(?:190[1-9]|19[1-9][0-9]|[2-7][0-9]{3}|8[0-8][0-9]{2}|89[0-8][0-9]|899[0-8])"
    r"-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])$"
)
_DAY = re.compile(DAY_PATTERN)
# The pattern's first and last days, as a refusal names them.
FIRST_DAY = date(FIRST_YEAR + 1, 1, 1).isoformat()
LAST_DAY = date(LAST_YEAR - 1, 12, 31).isoformat()
_ANY_YEAR_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def parse_day(field: str, value: object) -> date:
    """A local calendar date `YYYY-MM-DD`, or a 422 naming the field and the value.

    Only that form: `date.fromisoformat` alone would also read a week date (`2026-W49-2`), an
    ordinal date (`2026-335`) or the basic format (`20261201`)."""
    if isinstance(value, str) and _DAY.fullmatch(value) is not None:
        try:
            return parse_day_text(value)
        except ValueError:
            pass  # a day the calendar lacks, such as 2026-02-30
    elif isinstance(value, str) and _ANY_YEAR_DAY.fullmatch(value) is not None:
        try:
            parse_day_text(value)
        except ValueError:
            pass
        else:  # a real day, written as asked, in a year without a forecast
            raise InvalidInput(
                field, value, f"is out of range (expected a day from {FIRST_DAY} to {LAST_DAY})"
            )
    raise InvalidInput(field, value, "is not a date (expected YYYY-MM-DD, e.g. 2026-11-30)")


def read_scheduled_agents(conn: Connection) -> dict[tuple[str, ...], dict[Any, int]]:
    """Enabled agents counted per schedule and organisation (most share the default 03:00)."""
    rows = conn.execute(
        "SELECT update_schedule_times AS times, org_id, count(*) AS agents FROM agents"
        " WHERE update_schedule_enabled AND jsonb_array_length(update_schedule_times) > 0"
        " AND deleted_at IS NULL GROUP BY update_schedule_times, org_id"
    ).fetchall()
    counts: dict[tuple[str, ...], dict[Any, int]] = defaultdict(dict)
    for row in rows:
        counts[tuple(row["times"])][row["org_id"]] = row["agents"]
    return counts


class ForecastService:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def platform_day(self, day: date, *, now: datetime | None = None) -> PlatformDayForecast:
        """Every slot of local `day`; with `now`, also how many agents get each pair's current
        release that night at each wave, within the caps (the offers as they stand at `now`)."""
        with self._pool.connection() as conn:
            settings = read_settings(conn)
            counts = read_scheduled_agents(conn)
            needs = (
                None
                if now is None
                else read_release_needs(conn, day=day, settings=settings, now=now)
            )
        forecast = platform_day_forecast(counts, day=day, settings=settings)
        if needs is None:
            return forecast
        return replace(forecast, releases=release_nights(*needs, settings))

    def nights_with_rollout(
        self, days: Sequence[date], *, now: datetime
    ) -> tuple[tuple[PlatformDayForecast, ...], RolloutOverview]:
        """`platform_day` of each of `days`, the first with `now` (who gets each release that
        night), and the rollout's overview at `now`: the settings, the schedules and the fleet's
        kept offers read once (the operators' main page shows all of them)."""
        with self._pool.connection() as conn:
            settings = read_settings(conn)
            counts = read_scheduled_agents(conn)
            needs = read_release_needs(conn, day=days[0], settings=settings, now=now)
            overview = rollout_overview(conn, now)
        forecasts = [platform_day_forecast(counts, day=day, settings=settings) for day in days]
        forecasts[0] = replace(forecasts[0], releases=release_nights(*needs, settings))
        return tuple(forecasts), overview

    def publish_outlook(self, release_id: UUID, *, now: datetime) -> WaveOutlook | None:
        """What a release just published does in the next 24 hours: its wave, how many agents
        that wave reaches and the caps serve, and when the first of them asks."""
        with self._pool.connection() as conn:
            settings = read_settings(conn)
            return publish_outlook(conn, release_id, settings=settings, now=now)

    def org_day(self, day: date, *, org_id: UUID) -> OrgDayForecast:
        with self._pool.connection() as conn:
            settings = read_settings(conn)
            counts = read_scheduled_agents(conn)
        return org_day_forecast(counts, day=day, settings=settings, org_id=org_id)

    def next_rounds(self, *, now: datetime, org_id: UUID | None = None) -> dict[UUID, OrgRound]:
        """Each organisation's next round of updates and the bytes it downloads (`round_bytes`);
        only `org_id`'s when given."""
        with self._pool.connection() as conn:
            settings = read_settings(conn)
            return read_next_rounds(conn, settings=settings, now=now, org_id=org_id)
