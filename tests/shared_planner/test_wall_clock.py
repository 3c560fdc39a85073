"""Rule 6: daylight saving is solved once, in resolve_wall_time."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from shared_planner import (
    InvalidPlanningInput,
    InvalidTimeZone,
    WallTimeKind,
    describe_wall_time,
    resolve_wall_time,
)

AMS = "Europe/Amsterdam"


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_spring_gap_runs_shifted_forward_by_the_gap() -> None:
    assert resolve_wall_time(date(2027, 3, 28), time(2, 30), AMS) == utc(2027, 3, 28, 1, 30)


def test_autumn_repeat_runs_at_the_first_instant() -> None:
    assert resolve_wall_time(date(2027, 10, 31), time(2, 30), AMS) == utc(2027, 10, 31, 0, 30)


def test_a_callers_fold_does_not_pick_the_second_instant() -> None:
    wall = time(2, 30, fold=1)
    assert resolve_wall_time(date(2027, 10, 31), wall, AMS) == utc(2027, 10, 31, 0, 30)


def test_kinds_are_told_apart() -> None:
    assert describe_wall_time(date(2027, 3, 28), time(2, 30), AMS).kind is WallTimeKind.SKIPPED
    assert describe_wall_time(date(2027, 10, 31), time(2, 30), AMS).kind is WallTimeKind.REPEATED
    assert describe_wall_time(date(2027, 10, 31), time(3, 0), AMS).kind is WallTimeKind.SHOWN_ONCE
    skipped = describe_wall_time(date(2027, 3, 28), time(2, 30), AMS)
    assert skipped.shift == timedelta(hours=1)
    assert skipped.shown.replace(tzinfo=None) == datetime(2027, 3, 28, 3, 30)


def test_unknown_zone_is_refused_by_name() -> None:
    with pytest.raises(InvalidTimeZone, match=r"^tz: 'Europe/Amsterdamm' is not a known time zone"):
        resolve_wall_time(date(2027, 1, 1), time(3), "Europe/Amsterdamm")
    with pytest.raises(InvalidTimeZone, match=r"'\.\./etc/passwd'"):
        resolve_wall_time(date(2027, 1, 1), time(3), "../etc/passwd")


def test_a_wall_time_with_a_zone_is_refused() -> None:
    with pytest.raises(InvalidPlanningInput, match=r"^wall: '03:00:00\+00:00' carries"):
        resolve_wall_time(date(2027, 1, 1), time(3, tzinfo=UTC), AMS)


@pytest.mark.parametrize(
    ("day", "accepted"),
    [
        pytest.param(date(1899, 12, 31), False, id="last_day_before_1900"),
        pytest.param(date(1900, 1, 1), True, id="first_day_of_1900"),
        pytest.param(date(8999, 12, 31), True, id="last_day_of_8999"),
        pytest.param(date(9000, 1, 1), False, id="first_day_of_9000"),
        pytest.param(date(1, 1, 1), False, id="start_of_the_calendar"),
    ],
)
def test_days_outside_the_planners_years_are_refused_by_name(day: date, accepted: bool) -> None:
    if accepted:
        assert resolve_wall_time(day, time(3), AMS).tzinfo is UTC
    else:
        with pytest.raises(
            InvalidPlanningInput, match=rf"^day: '{day.isoformat()}' is out of range"
        ):
            resolve_wall_time(day, time(3), AMS)


def test_a_zone_object_is_taken_as_it_is() -> None:
    zone = ZoneInfo(AMS)
    assert resolve_wall_time(date(2027, 3, 28), time(2, 30), zone) == utc(2027, 3, 28, 1, 30)


@pytest.mark.parametrize(
    ("day", "wall", "message"),
    [
        pytest.param(
            datetime(2027, 1, 1), time(3), r"^day: .* is not a date", id="datetime_as_day"
        ),
        pytest.param("2027-01-01", time(3), r"^day: '2027-01-01' is not a date", id="string_day"),
        pytest.param(date(2027, 1, 1), "03:00", r"^wall: '03:00' is not a time", id="string_wall"),
    ],
)
def test_day_and_wall_of_the_wrong_kind_are_refused(
    day: object, wall: object, message: str
) -> None:
    with pytest.raises(InvalidPlanningInput, match=message):
        resolve_wall_time(day, wall, AMS)  # type: ignore[arg-type]
