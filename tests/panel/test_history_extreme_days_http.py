"""The history's days at the ends of the calendar: `to=9999-12-31` (whose next midnight no date
holds) and `from=0001-01-01` are read as days like any other — the whole history, no 500."""

from __future__ import annotations

import pytest

from tests.panel.conftest import PanelWorld, sign_in_client


@pytest.mark.parametrize(
    "query",
    ["to=9999-12-31", "from=0001-01-01&to=9999-12-31", "from=9999-12-31&to=9999-12-31"],
)
@pytest.mark.parametrize("what", ["runs", "events"])
def test_the_last_day_of_the_calendar_is_a_day(
    panel_world: PanelWorld, what: str, query: str
) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as reader:
        answer = reader.get(f"/panel/history/{what}?{query}")
    assert answer.status_code == 200, answer.text[:200]
    assert answer.headers["content-type"].startswith("text/html")


@pytest.mark.parametrize("what", ["runs", "events"])
def test_the_export_of_the_calendars_last_days(panel_world: PanelWorld, what: str) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as reader:
        answer = reader.get(f"/panel/history/{what}.csv?from=9999-12-30&to=9999-12-31")
    assert answer.status_code == 200, answer.text[:200]
    assert answer.headers["content-type"].startswith("text/csv")
    assert answer.text.count("\r\n") == 1  # the header row; nothing happened in 9999
