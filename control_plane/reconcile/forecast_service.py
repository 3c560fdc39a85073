"""The forecast read from the database: the platform's view and one organisation's."""

from __future__ import annotations

from datetime import date
from typing import Any
from uuid import UUID

from control_plane.errors import InvalidInput
from control_plane.reconcile.forecast import day_forecast, read_scheduled_agents
from control_plane.services.settings import read_settings
from control_plane.types import Pool

__all__ = ["ForecastService", "parse_day"]


def parse_day(field: str, value: object) -> date:
    """A local calendar date `YYYY-MM-DD`, or a 422 naming the field and the value."""
    if isinstance(value, str):
        try:
            day = date.fromisoformat(value)
        except ValueError:
            pass
        else:
            if len(value) == 10 and 1900 <= day.year <= 8999:
                return day
    raise InvalidInput(field, value, "is not a date (expected YYYY-MM-DD, e.g. 2026-11-30)")


class ForecastService:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def day(self, day: date, *, org_id: UUID | None = None) -> dict[str, Any]:
        with self._pool.connection() as conn:
            settings = read_settings(conn)
            counts = read_scheduled_agents(conn)
        return day_forecast(counts, day=day, settings=settings, org_id=org_id)
