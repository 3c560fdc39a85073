"""`GET`/`PUT /v1/admin/settings`: the platform's zone, catch-up window and caps, validated."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from control_plane.database import open_pool
from control_plane.errors import InvalidInput
from control_plane.registry import build_services
from control_plane.settings.services import PlatformSettings
from tests.control_plane.conftest import Api, serve_in_thread
from tests.worlds.clocks import ManualClock

DEFAULTS = {
    "timezone": "Europe/Amsterdam",
    "catch_up_minutes": 15,
    "grant_margin_seconds": 60,
    "org_cap": 5,
    "global_cap": 25,
    "retention_days": 400,
}


def test_defaults_are_the_designed_ones(api: Api, operator_key: str) -> None:
    with api.client(operator_key) as client:
        assert client.get("/v1/admin/settings").json() == DEFAULTS


def test_put_changes_only_the_named_settings(api: Api, operator_key: str) -> None:
    with api.client(operator_key) as client:
        response = client.put(
            "/v1/admin/settings", json={"timezone": "America/New_York", "org_cap": 2}
        )
        assert response.status_code == 200
        expected = {**DEFAULTS, "timezone": "America/New_York", "org_cap": 2}
        assert response.json() == expected
        assert client.get("/v1/admin/settings").json() == expected


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        pytest.param({"timezone": "Mars/Olympus"}, "timezone", "not a known time zone", id="zone"),
        pytest.param({"timezone": ""}, "timezone", "not a known time zone", id="empty_zone"),
        pytest.param({"catch_up_minutes": 0}, "catch_up_minutes", "between 1 and", id="window_0"),
        pytest.param({"catch_up_minutes": 600}, "catch_up_minutes", "between 1 and", id="window"),
        pytest.param({"org_cap": -1}, "org_cap", "at least 1", id="negative_org_cap"),
        pytest.param({"global_cap": -5}, "global_cap", "at least 1", id="negative_global_cap"),
        pytest.param({"org_cap": "five"}, "org_cap", "valid integer", id="cap_not_number"),
        pytest.param({"speed": 2}, "speed", "extra inputs", id="unknown_setting"),
        pytest.param(
            {"grant_margin_seconds": -1}, "grant_margin_seconds", "between 0 and 899", id="margin"
        ),
        pytest.param(
            {"grant_margin_seconds": 900},
            "grant_margin_seconds",
            "between 0 and 899",
            id="margin_as_long_as_the_window",
        ),
        pytest.param(
            {"catch_up_minutes": 2, "grant_margin_seconds": 120},
            "grant_margin_seconds",
            "between 0 and 119",
            id="margin_fills_the_new_window",
        ),
        pytest.param(
            {"catch_up_minutes": 1},
            "catch_up_minutes",
            "lower grant_margin_seconds first",
            id="window_shorter_than_the_margin",
        ),
        pytest.param(
            {"grant_margin_seconds": "60"}, "grant_margin_seconds", "valid integer", id="as_text"
        ),
        pytest.param({"retention_days": 0}, "retention_days", "between 30 and", id="keep_none"),
        pytest.param({"retention_days": -1}, "retention_days", "between 30 and", id="negative"),
        pytest.param(
            {"retention_days": 7}, "retention_days", "between 30 and", id="forgets_the_soak"
        ),
        pytest.param({"retention_days": 36500}, "retention_days", "between 30 and", id="century"),
        pytest.param(
            {"retention_days": "400"}, "retention_days", "valid integer", id="days_as_text"
        ),
        pytest.param(
            {"retention_days": True}, "retention_days", "valid integer", id="days_as_bool"
        ),
    ],
)
def test_bad_setting_gets_422_naming_the_field(
    api: Api, operator_key: str, body: dict[str, Any], field: str, words: str
) -> None:
    with api.client(operator_key) as client:
        response = client.put("/v1/admin/settings", json=body)
        assert response.status_code == 422
        detail = response.json()["detail"]
        assert field in detail["message"]
        assert words in detail["message"].lower()
        assert client.get("/v1/admin/settings").json() == DEFAULTS


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"grant_margin_seconds": 0}, id="no_margin"),
        pytest.param({"grant_margin_seconds": 899}, id="all_but_the_window_s_last_second"),
        pytest.param({"catch_up_minutes": 1, "grant_margin_seconds": 30}, id="both_at_once"),
    ],
)
def test_a_grant_margin_shorter_than_the_window_is_stored(
    api: Api, operator_key: str, body: dict[str, Any]
) -> None:
    with api.client(operator_key) as client:
        response = client.put("/v1/admin/settings", json=body)
        assert response.status_code == 200, response.text
        assert client.get("/v1/admin/settings").json() == {**DEFAULTS, **body}


def test_a_window_the_default_margin_fills_names_the_window_the_form_sent() -> None:
    # The operators' page sends every field it shows, and it shows no margin: the refusal must
    # point at the window it can mark.
    form = {"timezone": "Europe/Amsterdam", "catch_up_minutes": 1, "org_cap": 5, "global_cap": 25}
    with pytest.raises(InvalidInput) as refused:
        PlatformSettings().with_changes(form)
    assert refused.value.fields["field"] == "catch_up_minutes"
    assert "lower grant_margin_seconds first" in str(refused.value)


def test_busy_database_gets_503_not_a_stack_trace(
    database_url: str, clock: ManualClock, operator_key: str
) -> None:
    # A pool whose only connection is held: a request waits its (short) turn, then gets a 503.
    pool = open_pool(database_url, min_size=1, max_size=1, timeout=0.5)
    try:
        with pool.connection():
            server = serve_in_thread(build_services(pool), clock)
            with server, httpx.Client(base_url=server.base_url) as client:
                response = client.get(
                    "/v1/admin/settings", headers={"Authorization": f"Bearer {operator_key}"}
                )
    finally:
        pool.close()
    assert response.status_code == 503
    assert response.json()["detail"]["code"] == "database_unavailable"
