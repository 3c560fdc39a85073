"""The server's check of the slot key an agent names: what it cannot place is `not_a_slot`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from control_plane.claims.slots import checked_slot
from control_plane.errors import ClaimRefused

NOW = datetime(2026, 11, 30, 2, 5, tzinfo=UTC)  # 03:05 in Amsterdam


def check(slot_key: object) -> object:
    return checked_slot(
        slot_key,
        enabled=True,
        times=["03:00"],
        timezone="Europe/Amsterdam",
        catch_up=timedelta(minutes=15),
        now=NOW,
    )


def test_the_open_slot_is_accepted() -> None:
    slot = check("2026-11-30T03:00")
    assert slot.at == datetime(2026, 11, 30, 2, 0, tzinfo=UTC)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "slot_key",
    [
        pytest.param("0001-01-01T03:00", id="year_one_overflows_the_calendar"),
        pytest.param("9999-12-31T03:00", id="year_9999_past_the_planner"),
        pytest.param("2026-02-30T03:00", id="no_such_date"),
        pytest.param("2026-11-30T03:07", id="not_a_scheduled_time"),
        pytest.param(3, id="not_a_string"),
    ],
)
def test_a_key_the_planner_cannot_place_is_not_a_slot(slot_key: object) -> None:
    with pytest.raises(ClaimRefused) as refused:
        check(slot_key)
    assert refused.value.code == "not_a_slot"
    assert refused.value.status == 422
