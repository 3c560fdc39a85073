"""Rule 6: daylight saving is solved once, in resolve_wall_time."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

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
