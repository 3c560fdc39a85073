"""The history's days at the ends of the calendar: `to=9999-12-31` (whose next midnight no date
holds) and `from=0001-01-01` are read as days like any other — the whole history, no 500."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tests.conftest import RunningControlPlane
from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client, spring_clock


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


# An export's range is counted in the organisation's days, whatever their hours: the last day of
# the calendar (whose end no datetime holds), a range across the night the clocks go back (a day
# of 25 hours), a zone far east and far west of UTC.
EXPORT_RANGES = [
    ("9999-10-01", "9999-12-31", 200),  # the calendar's last 92 days
    ("9999-09-30", "9999-12-31", 400),  # 93
    ("9999-12-31", "9999-12-31", 200),  # the calendar's last day
    ("2026-08-01", "2026-10-31", 200),  # 92 days, the clocks going back in them
    ("2026-07-31", "2026-10-31", 400),  # 93
    ("2026-01-01", "2026-04-02", 200),  # 92 days, the clocks going forward in them
    ("2026-01-01", "2026-04-03", 400),  # 93
    ("2026-10-25", "2026-10-25", 200),  # the day of 25 hours in Europe
    ("2026-10-26", "2026-10-25", 400),  # the last day before the first
    ("0001-01-01", "0001-01-02", 200),  # the calendar's first days
    ("0001-01-01", "9999-12-31", 400),  # all of them
]


@pytest.mark.parametrize(
    "zone", ["Europe/Amsterdam", "Pacific/Kiritimati", "Pacific/Pago_Pago", "America/Santiago"]
)
def test_an_export_of_92_days_is_taken_and_93_refused(
    control_plane_server: Callable[..., RunningControlPlane], zone: str
) -> None:
    server = control_plane_server(fake_clock=spring_clock(), args=["--timezone", zone])
    org = server.create_org("Acme")
    wrong: list[tuple[str, str, str, int]] = []
    with httpx.Client(base_url=server.base_url, timeout=30) as reader:
        form = reader.get("/panel/sign-in")
        signed = reader.post(
            "/panel/sign-in", data={"key": org["panel_key"], "csrf": csrf_of(form.text)}
        )
        assert signed.status_code == 303
        for first, last, status in EXPORT_RANGES:
            for what in ("runs", "events"):
                answer = reader.get(f"/panel/history/{what}.csv?from={first}&to={last}")
                kind = "text/csv" if status == 200 else "text/html"
                if answer.status_code != status or not answer.headers["content-type"].startswith(
                    kind
                ):
                    wrong.append((what, first, last, answer.status_code))
                elif status == 400:
                    said = ("An export holds at most 92 days.", "before the first day")
                    assert any(words in answer.text for words in said), answer.text[:300]
        for query in ("from=0001-01-01&to=9999-12-31", "from=0001-01-01", "to=9999-12-31"):
            for what in ("runs", "events"):
                page = reader.get(f"/panel/history/{what}?{query}")
                if page.status_code != 200:
                    wrong.append((what, query, "", page.status_code))
    assert wrong == []
