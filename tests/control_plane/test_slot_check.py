"""The server's check of the slot key an agent names: what it cannot place is `not_a_slot`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from control_plane.claims.slots import checked_slot
from control_plane.errors import ClaimRefused

# Enrolled long before any slot these tests name.
ENROLLED = datetime(2000, 1, 1, tzinfo=UTC)

NOW = datetime(2026, 11, 30, 2, 5, tzinfo=UTC)  # 03:05 in Amsterdam


def check(slot_key: object) -> object:
    return checked_slot(
        slot_key,
        enabled=True,
        times=["03:00"],
        timezone="Europe/Amsterdam",
        catch_up=timedelta(minutes=15),
        enrolled_at=ENROLLED,
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


@pytest.mark.parametrize(
    ("enrolled_at", "claimable"),
    [
        pytest.param(datetime(2026, 11, 30, 2, 1, tzinfo=UTC), True, id="enrolled_in_the_window"),
        pytest.param(datetime(2026, 11, 30, 1, 50, tzinfo=UTC), True, id="enrolled_before"),
        # The enrolling replica's clock ahead of the claiming one's: the window had closed.
        pytest.param(datetime(2026, 11, 30, 2, 15, tzinfo=UTC), False, id="enrolled_at_close"),
        pytest.param(datetime(2026, 11, 30, 2, 16, tzinfo=UTC), False, id="enrolled_after"),
    ],
)
def test_a_slot_is_the_agents_when_its_window_closes_after_enrollment(
    enrolled_at: datetime, claimable: bool
) -> None:
    """The missed pass's rule too (`agents_slot`): what the claim takes, the pass holds it to."""
    arguments = {
        "enabled": True,
        "times": ["03:00"],
        "timezone": "Europe/Amsterdam",
        "catch_up": timedelta(minutes=15),
        "enrolled_at": enrolled_at,
        "now": NOW,
    }
    if claimable:
        assert checked_slot("2026-11-30T03:00", **arguments).key == "2026-11-30T03:00"  # type: ignore[arg-type]
        return
    with pytest.raises(ClaimRefused) as refused:
        checked_slot("2026-11-30T03:00", **arguments)  # type: ignore[arg-type]
    assert refused.value.code == "not_a_slot"
    assert "before the agent was enrolled" in str(refused.value)
