"""The server's own check of a claimed slot: the planner's due slot is always accepted, and the
window is judged on the server's clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from control_plane.claims.caps import retry_after_seconds, round_start
from control_plane.claims.slots import _valid_slot_key, checked_slot
from control_plane.errors import ClaimRefused
from shared_planner import due_slot

# Enrolled long before any slot these tests name.
ENROLLED = datetime(2000, 1, 1, tzinfo=UTC)

ZONES = ["Europe/Amsterdam", "America/New_York", "Australia/Lord_Howe", "America/Santiago", "UTC"]
GRID = [f"{h:02d}:{m:02d}" for h in range(24) for m in range(0, 60, 5)]


@settings(max_examples=300, deadline=None)
@given(
    times=st.lists(st.sampled_from(GRID), min_size=1, max_size=6, unique=True),
    zone=st.sampled_from(ZONES),
    now=st.datetimes(
        min_value=datetime(2026, 1, 1), max_value=datetime(2028, 12, 31), timezones=st.just(UTC)
    ),
    catch_up=st.integers(min_value=1, max_value=120),
)
def test_the_planners_due_slot_is_always_accepted(
    times: list[str], zone: str, now: datetime, catch_up: int
) -> None:
    window = timedelta(minutes=catch_up)
    slot = due_slot(times, now=now, tz=zone, catch_up=window)
    if slot is None:
        return
    accepted = checked_slot(
        slot.key,
        enabled=True,
        times=times,
        timezone=zone,
        catch_up=window,
        enrolled_at=ENROLLED,
        now=now,
    )
    assert accepted.at == slot.at


@pytest.mark.parametrize(
    ("slot_key", "times", "code"),
    [
        # 02:30 does not exist on 2027-03-28 in Amsterdam; the planner runs it at 03:30 CEST.
        pytest.param("2027-03-28T02:30", ["02:30"], None, id="spring_gap_0230_key"),
        pytest.param("2027-03-28T03:30", ["02:30"], "not_a_slot", id="spring_gap_wrong_label"),
    ],
)
def test_daylight_saving_keys_follow_the_planner(
    slot_key: str, times: list[str], code: str | None
) -> None:
    now = datetime(2027, 3, 28, 1, 35, tzinfo=UTC)  # 03:35 CEST
    expected = due_slot(times, now=now, tz="Europe/Amsterdam")
    assert expected is not None
    if code is None:
        assert expected.key == slot_key
        checked_slot(
            slot_key,
            enabled=True,
            times=times,
            timezone="Europe/Amsterdam",
            catch_up=timedelta(minutes=15),
            enrolled_at=ENROLLED,
            now=now,
        )
        return
    with pytest.raises(ClaimRefused) as refused:
        checked_slot(
            slot_key,
            enabled=True,
            times=times,
            timezone="Europe/Amsterdam",
            catch_up=timedelta(minutes=15),
            enrolled_at=ENROLLED,
            now=now,
        )
    assert refused.value.code == code


@pytest.mark.parametrize(
    ("now", "seconds"),
    [
        pytest.param(datetime(2026, 11, 30, 2, 1, 0, tzinfo=UTC), 60, id="round_start"),
        pytest.param(datetime(2026, 11, 30, 2, 1, 15, tzinfo=UTC), 45, id="quarter"),
        pytest.param(datetime(2026, 11, 30, 2, 1, 59, 500000, tzinfo=UTC), 1, id="last_half"),
        pytest.param(datetime(2026, 11, 30, 2, 1, 15, 1, tzinfo=UTC), 45, id="a_microsecond_in"),
        pytest.param(
            datetime(2026, 11, 30, 3, 1, 15, tzinfo=timezone(timedelta(hours=1))),
            45,
            id="another_offset",
        ),
    ],
)
def test_retry_after_counts_to_the_next_round(now: datetime, seconds: int) -> None:
    assert retry_after_seconds(now) == seconds
    assert round_start(now) == datetime(2026, 11, 30, 2, 1, tzinfo=UTC)


def test_hostile_slot_keys_are_judged_each_time_and_never_remembered() -> None:
    """Valid keys are remembered as valid (the fleet sends the same few); a refused one must be
    refused again and leave nothing behind, however many different ones are sent."""
    _valid_slot_key.cache_clear()
    for number in range(2000):
        for hostile in (f"2026-11-30T03:{number:03d}", f"2026-02-30T{number % 100:02d}:00"):
            with pytest.raises(ClaimRefused) as refused:
                checked_slot(
                    hostile,
                    enabled=True,
                    times=["03:00"],
                    timezone="Europe/Amsterdam",
                    catch_up=timedelta(minutes=15),
                    enrolled_at=ENROLLED,
                    now=datetime(2026, 11, 30, 2, 5, tzinfo=UTC),
                )
            assert refused.value.code == "not_a_slot"
    assert _valid_slot_key.cache_info().currsize == 0
    slot = checked_slot(
        "2026-11-30T03:00",
        enabled=True,
        times=["03:00"],
        timezone="Europe/Amsterdam",
        catch_up=timedelta(minutes=15),
        enrolled_at=ENROLLED,
        now=datetime(2026, 11, 30, 2, 5, tzinfo=UTC),
    )
    assert slot.at == datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
    assert _valid_slot_key.cache_info().currsize == 1
