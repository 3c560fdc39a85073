"""`GET /v1/forecast` is one organisation's view: another organisation's schedule —
its times, its slots, its overlaps — is not in it. Only the platform's total at a slot this
organisation shares weighs in its estimated share, as a number."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date
from typing import Any

import pytest

from control_plane.errors import InvalidInput
from control_plane.forecast.services import DAY_PATTERN, parse_day
from ground.limits import FIRST_YEAR, LAST_YEAR
from tests.control_plane.conftest import Api, Org
from tests.control_plane.reconcile_fleet import Fleet

DAY = "2026-12-01"


def _forecast(api: Api, org: Org) -> dict[str, Any]:
    with api.client(org.panel_key) as client:
        response = client.get("/v1/forecast", params={"date": DAY})
    assert response.status_code == 200
    view: dict[str, Any] = response.json()
    return view


def _agents(fleet: Fleet, org: Org, times: list[str], count: int, prefix: str) -> None:
    for n in range(count):
        fleet.agent(org.org_id, f"{prefix}-{n:02d}", times=times)  # type: ignore[arg-type]


def test_another_organisations_overlapping_slot_is_not_named(
    api: Api, fleet: Fleet, make_org: Callable[..., Org]
) -> None:
    acme, rival = make_org("Acme"), make_org("Rival")
    _agents(fleet, acme, ["03:00"], 2, "acme")
    alone = _forecast(api, acme)
    # Rival schedules 03:05 and 04:35: inside Acme's 03:00 window, and a time of its own.
    _agents(fleet, rival, ["03:05", "04:35"], 3, "rival")
    beside = _forecast(api, acme)
    assert [slot["key"] for slot in beside["slots"]] == ["2026-12-01T03:00"]
    assert beside["slots"][0]["overlaps"] == []
    assert "03:05" not in str(beside) and "04:35" not in str(beside)
    assert beside == alone


def test_a_slot_shared_with_another_organisation_shows_only_own_figures(
    api: Api, fleet: Fleet, make_org: Callable[..., Org]
) -> None:
    acme, rival = make_org("Acme"), make_org("Rival")
    _agents(fleet, acme, ["03:00"], 2, "acme")
    _agents(fleet, rival, ["03:00"], 7, "rival")
    [slot] = _forecast(api, acme)["slots"]
    assert slot["agents"] == 2
    assert "organisations" not in slot and "orgs_over_their_cap" not in slot
    assert str(rival.org_id) not in str(slot)


def test_an_organisation_without_agents_sees_no_slot_of_others(
    api: Api, fleet: Fleet, make_org: Callable[..., Org]
) -> None:
    acme, rival = make_org("Acme"), make_org("Rival")
    _agents(fleet, rival, ["03:00", "13:30"], 2, "rival")
    assert _forecast(api, acme)["slots"] == []


# Dates `date.fromisoformat` reads since Python 3.11, each naming 2026-12-01: the documented form
# is YYYY-MM-DD alone.
OTHER_DATE_FORMS = [
    pytest.param("2026-W49-2", id="week_date"),
    pytest.param("2026W492", id="week_date_basic"),
    pytest.param("2026-335", id="ordinal_date"),
    pytest.param("20261201", id="basic_date"),
    pytest.param("2026-12-01T03:00", id="date_and_time"),
    pytest.param("\u0662\u0660\u0662\u0666-\u0661\u0662-\u0660\u0661", id="arabic_indic_digits"),
    pytest.param("", id="empty"),
]


@pytest.mark.parametrize("path", ["/v1/forecast", "/v1/admin/forecast"])
@pytest.mark.parametrize("text", OTHER_DATE_FORMS)
def test_a_date_in_another_form_is_a_422_naming_the_expected_form(
    api: Api, operator_key: str, make_org: Callable[..., Org], path: str, text: str
) -> None:
    key = operator_key if "admin" in path else make_org().panel_key
    with api.client(key) as client:
        response = client.get(path, params={"date": text})
    assert response.status_code == 422, response.text
    message = response.json()["detail"]["message"]
    assert message == f"date: {text!r} is not a date (expected YYYY-MM-DD, e.g. 2026-11-30)"


def test_the_day_pattern_takes_the_planners_years_but_its_first_and_last() -> None:
    # A day's forecast walks the days around it: the planner's first and last years are kept free.
    for year in range(1000, 10000):
        text = f"{year:04d}-06-15"
        taken = FIRST_YEAR < year < LAST_YEAR
        assert (re.fullmatch(DAY_PATTERN, text) is not None) == taken, text
        if taken:
            assert parse_day("date", text) == date(year, 6, 15)
        else:
            with pytest.raises(InvalidInput):
                parse_day("date", text)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("1901-01-01", id="first_day"),
        pytest.param("8998-12-31", id="last_day"),
    ],
)
@pytest.mark.parametrize("path", ["/v1/forecast", "/v1/admin/forecast"])
def test_the_first_and_last_day_have_a_forecast(
    api: Api, operator_key: str, make_org: Callable[..., Org], path: str, text: str
) -> None:
    key = operator_key if "admin" in path else make_org().panel_key
    with api.client(key) as client:
        response = client.get(path, params={"date": text})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("2026-02-30", "is not a date (expected YYYY-MM-DD", id="february_30"),
        # Real days, written as asked: the answer says which days have a forecast.
        pytest.param(
            "1900-01-01",
            "is out of range (expected a day from 1901-01-01 to 8998-12-31)",
            id="planners_first_year_was_a_500",
        ),
        pytest.param(
            "0999-01-01",
            "is out of range (expected a day from 1901-01-01 to 8998-12-31)",
            id="before_1900",
        ),
        pytest.param(
            "8999-12-31",
            "is out of range (expected a day from 1901-01-01 to 8998-12-31)",
            id="planners_last_year",
        ),
    ],
)
@pytest.mark.parametrize("path", ["/v1/forecast", "/v1/admin/forecast"])
def test_a_day_without_a_forecast_is_a_422_naming_it(
    api: Api,
    operator_key: str,
    make_org: Callable[..., Org],
    path: str,
    text: str,
    expected: str,
) -> None:
    key = operator_key if "admin" in path else make_org().panel_key
    with api.client(key) as client:
        response = client.get(path, params={"date": text})
    assert response.status_code == 422, response.text
    assert response.json()["detail"]["message"].startswith(f"date: {text!r} {expected}")


def test_the_forecast_date_is_declared_as_a_date_with_its_pattern(api: Api) -> None:
    with api.client() as client:
        document = client.get("/openapi.json").json()
    for path in ("/v1/forecast", "/v1/admin/forecast"):
        (parameter,) = document["paths"][path]["get"]["parameters"]
        assert parameter["schema"]["format"] == "date"
        assert parameter["schema"]["pattern"] == DAY_PATTERN
