"""Rules 5, 6, 7: which slot is due, found by walking calendar days and ordered by instant."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from shared_planner import (
    MAX_CATCH_UP,
    InvalidPlanningInput,
    InvalidSchedule,
    InvalidTimeZone,
    Slot,
    due_slot,
    latest_closed_slot,
    next_slot,
    slots_between,
    slots_on_day,
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


AT = utc(2027, 1, 1, 2, 0)  # 03:00 CET on 1 January 2027
TICK = timedelta(microseconds=1)
WINDOW = timedelta(minutes=15)


@pytest.mark.parametrize(
    ("now", "due"),
    [
        pytest.param(AT - TICK, False, id="just_before_at"),
        pytest.param(AT, True, id="now_equals_at"),
        pytest.param(AT + WINDOW - TICK, True, id="last_moment_of_window"),
        pytest.param(AT + WINDOW, False, id="now_equals_at_plus_catch_up"),
    ],
)
def test_window_boundaries(now: datetime, due: bool) -> None:
    slot = due_slot(["03:00"], now=now, tz=AMS)
    assert (slot is not None) is due
    if slot is not None:
        assert slot.at == AT


@pytest.mark.parametrize(
    ("now", "due"),
    [
        pytest.param(utc(2027, 1, 1, 22, 55), True, id="at_2355"),
        pytest.param(utc(2027, 1, 1, 23, 5), True, id="at_0005_next_day"),
        pytest.param(utc(2027, 1, 1, 23, 10) - TICK, True, id="just_before_0010_next_day"),
        pytest.param(utc(2027, 1, 1, 23, 10), False, id="at_0010_next_day"),
    ],
)
def test_2355_window_runs_past_midnight(now: datetime, due: bool) -> None:
    slot = due_slot(["23:55"], now=now, tz=AMS)
    assert (slot.key if slot else None) == ("2027-01-01T23:55" if due else None)


@pytest.mark.parametrize(
    ("last_consumed", "due"),
    [
        pytest.param(AT - TICK, True, id="consumed_just_before_at"),
        pytest.param(AT, False, id="consumed_at_at"),
        pytest.param(AT + TICK, False, id="consumed_after_at"),
    ],
)
def test_last_consumed_boundary(last_consumed: datetime, due: bool) -> None:
    slot = due_slot(["03:00"], now=AT + timedelta(minutes=5), tz=AMS, last_consumed=last_consumed)
    assert (slot is not None) is due


def test_the_latest_open_slot_is_due_and_consuming_it_supersedes_the_earlier() -> None:
    times = ["03:00", "03:05", "03:10"]
    now = utc(2027, 1, 1, 2, 12)
    slot = due_slot(times, now=now, tz=AMS)
    assert slot is not None
    assert slot.key == "2027-01-01T03:10"
    assert due_slot(times, now=now, tz=AMS, last_consumed=slot.at) is None


def test_a_slot_after_the_last_consumed_one_is_still_due() -> None:
    # last_consumed is an instant: everything up to it is settled, nothing after it is.
    times = ["03:00", "03:05"]
    now = utc(2027, 1, 1, 2, 7)
    slot = due_slot(times, now=now, tz=AMS, last_consumed=utc(2027, 1, 1, 2, 0))
    assert slot is not None
    assert slot.key == "2027-01-01T03:05"


@pytest.mark.parametrize(
    ("catch_up", "message"),
    [
        pytest.param(timedelta(0), r"^catch_up: 0:00:00 is out of range", id="zero"),
        pytest.param(timedelta(minutes=-15), r"^catch_up: -1 day, 23:45:00 is out", id="negative"),
        pytest.param(
            timedelta(minutes=120, microseconds=1), r"^catch_up: 2:00:00.000001", id="over_2h"
        ),
        pytest.param(timedelta(hours=24), r"^catch_up: 1 day, 0:00:00 is out", id="a_whole_day"),
        pytest.param(15, r"^catch_up: 15 is not a timedelta", id="bare_number"),
    ],
)
def test_catch_up_out_of_range_is_refused(catch_up: timedelta, message: str) -> None:
    with pytest.raises(InvalidPlanningInput, match=message):
        due_slot(["03:00"], now=AT, tz=AMS, catch_up=catch_up)


def test_the_longest_catch_up_the_contract_allows_is_accepted() -> None:
    # ground.limits.MAX_CATCH_UP_MINUTES: the same bound the control plane and the agent hold.
    slot = due_slot(["03:00"], now=AT + timedelta(minutes=119), tz=AMS, catch_up=MAX_CATCH_UP)
    assert slot is not None
    assert slot.at == AT


def test_naive_last_consumed_is_refused() -> None:
    with pytest.raises(InvalidPlanningInput, match=r"^last_consumed: .* has no time zone"):
        due_slot(["03:00"], now=AT, tz=AMS, last_consumed=datetime(2027, 1, 1))


def test_now_in_another_offset_means_the_same_instant() -> None:
    tokyo_now = AT.astimezone(ZoneInfo("Asia/Tokyo"))
    assert due_slot(["03:00"], now=tokyo_now, tz=AMS) == due_slot(["03:00"], now=AT, tz=AMS)


def test_bad_schedule_is_refused_by_every_planner_function() -> None:
    with pytest.raises(InvalidSchedule, match=r"^times\[0\]: '3:00'"):
        due_slot(["3:00"], now=AT, tz=AMS)
    with pytest.raises(InvalidSchedule, match=r"^times\[1\]: \{\"a\": 1\}"):
        slots_between(["03:00", {"a": 1}], start=AT, end=AT, tz=AMS)  # type: ignore[list-item]
    with pytest.raises(InvalidSchedule, match=r"^times: '03:00' is not a list"):
        next_slot("03:00", after=AT, tz=AMS)


def test_unknown_zone_is_refused_by_every_planner_function() -> None:
    with pytest.raises(InvalidTimeZone):
        due_slot(["03:00"], now=AT, tz="Mars/Olympus_Mons")
    with pytest.raises(InvalidTimeZone):
        next_slot(["03:00"], after=AT, tz="")


def test_slots_between_is_half_open() -> None:
    assert [s.at for s in slots_between(["03:00"], start=AT, end=AT + TICK, tz=AMS)] == [AT]
    assert slots_between(["03:00"], start=AT - timedelta(hours=1), end=AT, tz=AMS) == []
    assert slots_between(["03:00"], start=AT + TICK, end=AT + timedelta(hours=1), tz=AMS) == []


def test_slots_between_refuses_a_reversed_range() -> None:
    with pytest.raises(InvalidPlanningInput, match=r"^end: .* is before start"):
        slots_between(["03:00"], start=AT, end=AT - TICK, tz=AMS)


def test_slots_between_spans_days_one_slot_per_time_per_day() -> None:
    slots = slots_between(["03:00", "23:55"], start=utc(2027, 1, 1), end=utc(2027, 1, 31), tz=AMS)
    assert len(slots) == 60
    assert [s.at for s in slots] == sorted(s.at for s in slots)


def test_next_slot_boundaries() -> None:
    assert next_slot(["03:00"], after=AT - TICK, tz=AMS).at == AT
    assert next_slot(["03:00"], after=AT, tz=AMS).at == AT + timedelta(days=1)


def test_next_slot_across_the_day_that_never_happened() -> None:
    slot = next_slot(["03:00"], after=utc(2011, 12, 29, 13, 0), tz="Pacific/Apia")
    assert slot.key == "2011-12-31T03:00"
    assert slot.at == utc(2011, 12, 30, 13, 0)


def test_slot_refuses_a_key_that_does_not_match() -> None:
    with pytest.raises(InvalidPlanningInput, match=r"^key: '2027-01-01T03:05'"):
        Slot(key="2027-01-01T03:05", day=date(2027, 1, 1), wall=time(3, 0), at=AT)


def test_parsed_times_and_strings_plan_alike() -> None:
    assert due_slot([time(3, 0)], now=AT, tz=AMS) == due_slot(["03:00"], now=AT, tz=AMS)


@pytest.mark.parametrize(
    "now",
    [
        pytest.param(datetime(1899, 12, 31, 23, 0, tzinfo=UTC), id="before_1900"),
        pytest.param(datetime(9000, 1, 1, tzinfo=UTC), id="from_9000"),
        pytest.param(datetime.min.replace(tzinfo=UTC), id="start_of_the_calendar"),
        pytest.param(datetime.max.replace(tzinfo=UTC), id="end_of_the_calendar"),
    ],
)
def test_instants_outside_the_planners_years_are_refused_not_crashed_on(now: datetime) -> None:
    with pytest.raises(InvalidPlanningInput, match=r"^now: .* is out of range"):
        due_slot(["03:00"], now=now, tz=AMS)


def test_an_unhashable_entry_is_refused_naming_its_index() -> None:
    with pytest.raises(InvalidSchedule, match=r"^times\[1\]: \[\"03:00\"\] is not a string"):
        due_slot(["03:00", ["03:00"]], now=AT, tz=AMS)  # type: ignore[list-item]


def test_a_slot_is_at_or_before_the_latest_closed_slot_exactly_when_its_window_has_closed() -> None:
    catch_up = timedelta(minutes=20)
    at = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
    slot = Slot(key="2026-11-30T03:00", day=date(2026, 11, 30), wall=time(3, 0), at=at)
    closes = slot.window_closes(catch_up)
    for until in (closes - timedelta(microseconds=1), closes, closes + timedelta(minutes=1)):
        assert (slot.at <= latest_closed_slot(until, catch_up)) == (closes <= until)
    assert slot.at > latest_closed_slot(closes - timedelta(microseconds=1), catch_up)


def test_a_slot_before_1970_is_due_like_any_other() -> None:
    # Before 1970 an instant is a negative number of Unix seconds; Amsterdam's clocks then ran
    # 19 min 32 s ahead of UTC, so 03:00 was 02:40:28Z.
    (slot,) = slots_on_day(["03:00"], date(1901, 6, 1), tz="Europe/Amsterdam")
    assert slot.at == datetime(1901, 6, 1, 2, 40, 28, tzinfo=UTC)
    now = datetime(1901, 6, 1, 2, 45, tzinfo=UTC)
    assert due_slot(["03:00"], now=now, tz="Europe/Amsterdam") == slot
    assert due_slot(["03:00"], now=slot.at - timedelta(seconds=1), tz="Europe/Amsterdam") is None
    assert due_slot(["00:00"], now=datetime(1969, 12, 31, 0, 1, tzinfo=UTC), tz="UTC") is not None
