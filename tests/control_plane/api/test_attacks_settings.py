"""Settings that would stop or mislead the platform silently: a cap of 0, an org cap
above the global one, the brake without a reason. Each is refused naming the field, and the
stored row is unchanged; the database refuses the same values from any other writer."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from control_plane.types import Pool
from tests.control_plane.conftest import Api


def _settings_row(pool: Pool) -> dict[str, Any]:
    with pool.connection() as conn:
        row = conn.execute("SELECT * FROM platform_settings").fetchone()
    assert row is not None
    return row


def _brake_row(pool: Pool) -> dict[str, Any]:
    with pool.connection() as conn:
        row = conn.execute("SELECT * FROM platform_brake").fetchone()
    assert row is not None
    return row


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        pytest.param({"global_cap": 0}, "global_cap", "at least 1", id="global_cap_zero"),
        pytest.param({"org_cap": 0}, "org_cap", "at least 1", id="org_cap_zero"),
        pytest.param({"org_cap": 26}, "org_cap", "above global_cap (25)", id="org_above_global"),
        pytest.param({"global_cap": 4}, "global_cap", "below org_cap (5)", id="global_below_org"),
        pytest.param(
            {"org_cap": 10, "global_cap": 9}, "org_cap", "above global_cap (9)", id="both_wrong"
        ),
        pytest.param({"global_cap": False}, "global_cap", "valid integer", id="false_cap"),
        pytest.param({"catch_up_minutes": True}, "catch_up_minutes", "valid integer", id="true"),
        pytest.param({"global_cap": 2**31}, "global_cap", "at most", id="beyond_integer_column"),
    ],
)
def test_a_cap_that_would_stop_or_mislead_is_refused_and_nothing_changes(
    api: Api, pool: Pool, operator_key: str, body: dict[str, Any], field: str, words: str
) -> None:
    before = _settings_row(pool)
    with api.client(operator_key) as client:
        response = client.put("/v1/admin/settings", json=body)
    assert response.status_code == 422
    message = response.json()["detail"]["message"]
    assert message.startswith(f"{field}: ") and words in message
    assert _settings_row(pool) == before


def test_lowering_both_caps_together_is_accepted(api: Api, operator_key: str) -> None:
    with api.client(operator_key) as client:
        response = client.put("/v1/admin/settings", json={"org_cap": 2, "global_cap": 3})
    assert response.status_code == 200
    assert (response.json()["org_cap"], response.json()["global_cap"]) == (2, 3)


@pytest.mark.parametrize(
    "statement",
    [
        pytest.param("UPDATE platform_settings SET global_cap = 0", id="global_cap_zero"),
        pytest.param("UPDATE platform_settings SET org_cap = 0", id="org_cap_zero"),
        pytest.param("UPDATE platform_settings SET org_cap = 30", id="org_above_global"),
        pytest.param(
            "UPDATE platform_settings SET grant_margin_seconds = -1", id="negative_grant_margin"
        ),
        pytest.param(
            "UPDATE platform_settings SET grant_margin_seconds = 900", id="margin_is_the_window"
        ),
        pytest.param(
            "UPDATE platform_settings SET catch_up_minutes = 1", id="window_inside_the_margin"
        ),
        pytest.param("UPDATE platform_brake SET engaged = true", id="brake_without_reason"),
        pytest.param(
            "UPDATE platform_brake SET engaged = true, reason = '  '", id="brake_blank_reason"
        ),
    ],
)
def test_the_database_refuses_the_same_values(pool: Pool, statement: str) -> None:
    with pytest.raises(psycopg.errors.CheckViolation), pool.connection() as conn:
        conn.execute(statement)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"engaged": True}, id="no_reason"),
        pytest.param({"engaged": True, "reason": None}, id="null_reason"),
        pytest.param({"engaged": True, "reason": "   "}, id="blank_reason"),
    ],
)
def test_the_brake_without_a_reason_is_refused_and_nothing_changes(
    api: Api, pool: Pool, operator_key: str, body: dict[str, Any]
) -> None:
    before = _brake_row(pool)
    with api.client(operator_key) as client:
        response = client.put("/v1/admin/brake", json=body)
    assert response.status_code == 422
    assert response.json()["detail"]["message"].startswith("reason: ")
    assert _brake_row(pool) == before


def test_releasing_the_brake_needs_no_reason(api: Api, operator_key: str) -> None:
    with api.client(operator_key) as client:
        engaged = client.put("/v1/admin/brake", json={"engaged": True, "reason": "incident 9"})
        released = client.put("/v1/admin/brake", json={"engaged": False})
    assert (engaged.status_code, released.status_code) == (200, 200)
    assert released.json()["engaged"] is False


@pytest.mark.parametrize(
    ("body", "field", "value"),
    [
        pytest.param({"grant_margin_seconds": 60.0}, "grant_margin_seconds", "60.0", id="float"),
        pytest.param({"grant_margin_seconds": 60.5}, "grant_margin_seconds", "60.5", id="fraction"),
        pytest.param(
            {"grant_margin_seconds": 10**30}, "grant_margin_seconds", str(10**30), id="huge"
        ),
        pytest.param(
            {"grant_margin_seconds": -(2**63)},
            "grant_margin_seconds",
            str(-(2**63)),
            id="very_negative",
        ),
        pytest.param({"grant_margin_seconds": [60]}, "grant_margin_seconds", "[60]", id="list"),
        pytest.param(
            {"grant_margin_seconds": None}, "grant_margin_seconds", "null", id="null_margin"
        ),
        pytest.param({"catch_up_minutes": None}, "catch_up_minutes", "null", id="null_window"),
        pytest.param({"org_cap": None}, "org_cap", "null", id="null_cap"),
        pytest.param({"timezone": None}, "timezone", "null", id="null_zone"),
        pytest.param({"catch_up_minutes": 1.0}, "catch_up_minutes", "1.0", id="window_float"),
    ],
)
def test_a_margin_or_window_that_is_not_a_whole_number_is_refused_naming_it(
    api: Api, pool: Pool, operator_key: str, body: dict[str, Any], field: str, value: str
) -> None:
    # A null is not "keep the value": a client that sends it for "no margin" must not be told
    # 200 while the margin stays as it was.
    before = _settings_row(pool)
    with api.client(operator_key) as client:
        response = client.put("/v1/admin/settings", json=body)
    assert response.status_code == 422, response.text
    message = response.json()["detail"]["message"]
    assert message.startswith(f"{field}: "), message
    assert value in message, message
    assert _settings_row(pool) == before
