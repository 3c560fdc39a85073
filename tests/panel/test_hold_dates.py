"""The hold form's "until" is a day as the date field sends it (YYYY-MM-DD): any other form
`date.fromisoformat` would read (a week date, an ordinal date, the basic format) is no day."""

from __future__ import annotations

from datetime import datetime, time
from zoneinfo import ZoneInfo

import pytest

from control_plane.panel.hold_routes import hold_start

AMSTERDAM = ZoneInfo("Europe/Amsterdam")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("2026-W49-2", id="week_date"),
        pytest.param("2026-335", id="ordinal_date"),
        pytest.param("20261201", id="basic_date"),
        pytest.param("2026-12-01T00:00", id="date_and_time"),
    ],
)
def test_a_day_in_another_form_is_no_day(text: str) -> None:
    assert hold_start(text, AMSTERDAM) is None


def test_a_day_from_the_date_field_starts_at_midnight_in_the_zone() -> None:
    expected = datetime.combine(datetime(2026, 12, 1).date(), time(0, 0), tzinfo=AMSTERDAM)
    assert hold_start(" 2026-12-01 ", AMSTERDAM) == expected
