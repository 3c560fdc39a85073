"""Rules 5, 6, 7: which slot is due, found by walking calendar days and ordered by instant."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

import pytest

from shared_planner import (
    InvalidPlanningInput,
    Slot,
    due_slot,
    next_slot,
    slots_between,
)

AMS = "Europe/Amsterdam"


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_2355_is_still_due_at_0005_the_next_day() -> None:
    slot = due_slot(["23:55"], now=utc(2027, 1, 1, 23, 5), tz=AMS)
    assert slot == Slot(
        key="2027-01-01T23:55", day=date(2027, 1, 1), wall=time(23, 55), at=utc(2027, 1, 1, 22, 55)
    )


def test_2355_is_no_longer_due_at_0010_the_next_day() -> None:
    assert due_slot(["23:55"], now=utc(2027, 1, 1, 23, 10), tz=AMS) is None


def test_a_consumed_slot_is_not_due_again() -> None:
    now = utc(2027, 1, 1, 2, 5)
    slot = due_slot(["03:00"], now=now, tz=AMS)
    assert slot is not None
    assert due_slot(["03:00"], now=now, tz=AMS, last_consumed=slot.at) is None


def test_naive_now_is_refused() -> None:
    with pytest.raises(InvalidPlanningInput, match=r"^now: '2027-01-01T02:05:00' has no time zone"):
        due_slot(["03:00"], now=datetime(2027, 1, 1, 2, 5), tz=AMS)


def test_slots_between_are_ordered_by_instant_not_label() -> None:
    slots = slots_between(
        ["02:30", "03:10"], start=utc(2027, 3, 28), end=utc(2027, 3, 28, 12), tz=AMS
    )
    assert [s.key for s in slots] == ["2027-03-28T03:10", "2027-03-28T02:30"]


def test_next_slot_is_strictly_after() -> None:
    slot = next_slot(["03:00"], after=utc(2027, 1, 1, 2, 0), tz=AMS)
    assert slot.key == "2027-01-02T03:00"
    assert slot.at - utc(2027, 1, 1, 2, 0) == timedelta(days=1)
