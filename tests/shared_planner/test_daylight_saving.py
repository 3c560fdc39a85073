"""Rule 6, as tables: every transition kind the zone database holds, resolved once and the same way.

Ambiguous -> the first instant (runs once); non-existent -> shifted forward by the gap (never
skipped); two wall times on one instant -> one slot, named by the wall time the clock shows.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from shared_planner import (
    WallTimeKind,
    describe_wall_time,
    due_slot,
    resolve_wall_time,
    slots_between,
)

SHOWN_ONCE, REPEATED, SKIPPED = WallTimeKind.SHOWN_ONCE, WallTimeKind.REPEATED, WallTimeKind.SKIPPED


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# zone, local day, wall time, the instant it runs at (UTC), its kind
RESOLVE_CASES = [
    pytest.param("Europe/Amsterdam", "2027-03-28", "02:30", "2027-03-28T01:30", SKIPPED,
                 id="amsterdam_spring_gap_0230_runs_0330_cest"),
    pytest.param("Europe/Amsterdam", "2027-03-28", "02:00", "2027-03-28T01:00", SKIPPED,
                 id="amsterdam_spring_gap_0200_is_0300_cest"),
    pytest.param("Europe/Amsterdam", "2027-03-28", "03:00", "2027-03-28T01:00", SHOWN_ONCE,
                 id="amsterdam_spring_0300_first_minute_after_gap"),
    pytest.param("Europe/Amsterdam", "2027-03-28", "01:55", "2027-03-28T00:55", SHOWN_ONCE,
                 id="amsterdam_spring_0155_last_minutes_before_gap"),
    pytest.param("Europe/Amsterdam", "2027-10-31", "02:30", "2027-10-31T00:30", REPEATED,
                 id="amsterdam_autumn_repeat_0230_first_instant"),
    pytest.param("Europe/Amsterdam", "2027-10-31", "02:00", "2027-10-31T00:00", REPEATED,
                 id="amsterdam_autumn_repeat_0200_first_instant"),
    pytest.param("Europe/Amsterdam", "2027-10-31", "02:55", "2027-10-31T00:55", REPEATED,
                 id="amsterdam_autumn_repeat_0255_first_instant"),
    pytest.param("Europe/Amsterdam", "2027-10-31", "03:00", "2027-10-31T02:00", SHOWN_ONCE,
                 id="amsterdam_autumn_0300_is_not_ambiguous"),
    pytest.param("Europe/Amsterdam", "2027-10-31", "01:55", "2027-10-30T23:55", SHOWN_ONCE,
                 id="amsterdam_autumn_0155_is_not_ambiguous"),
    pytest.param("America/New_York", "2027-03-14", "02:30", "2027-03-14T07:30", SKIPPED,
                 id="new_york_spring_gap_0230"),
    pytest.param("America/New_York", "2027-11-07", "01:30", "2027-11-07T05:30", REPEATED,
                 id="new_york_autumn_repeat_0130_first_instant"),
    pytest.param("America/New_York", "2027-11-07", "02:00", "2027-11-07T07:00", SHOWN_ONCE,
                 id="new_york_autumn_0200_is_not_ambiguous"),
    pytest.param("Australia/Lord_Howe", "2027-10-03", "02:00", "2027-10-02T15:30", SKIPPED,
                 id="lord_howe_spring_half_hour_gap_0200"),
    pytest.param("Australia/Lord_Howe", "2027-10-03", "02:15", "2027-10-02T15:45", SKIPPED,
                 id="lord_howe_spring_half_hour_gap_0215"),
    pytest.param("Australia/Lord_Howe", "2027-10-03", "02:30", "2027-10-02T15:30", SHOWN_ONCE,
                 id="lord_howe_spring_0230_after_gap"),
    pytest.param("Australia/Lord_Howe", "2027-04-04", "01:30", "2027-04-03T14:30", REPEATED,
                 id="lord_howe_autumn_half_hour_repeat_0130"),
    pytest.param("Australia/Lord_Howe", "2027-04-04", "02:00", "2027-04-03T15:30", SHOWN_ONCE,
                 id="lord_howe_autumn_0200_is_not_ambiguous"),
    pytest.param("America/Santiago", "2027-09-05", "00:00", "2027-09-05T04:00", SKIPPED,
                 id="santiago_midnight_does_not_exist"),
    pytest.param("America/Santiago", "2027-09-04", "23:55", "2027-09-05T03:55", SHOWN_ONCE,
                 id="santiago_2355_before_missing_midnight"),
    pytest.param("America/Santiago", "2027-04-03", "23:30", "2027-04-04T02:30", REPEATED,
                 id="santiago_autumn_repeat_2330_before_midnight"),
    pytest.param("Europe/Dublin", "2027-03-28", "01:30", "2027-03-28T01:30", SKIPPED,
                 id="dublin_negative_dst_spring_gap_0130"),
    pytest.param("Europe/Dublin", "2027-10-31", "01:30", "2027-10-31T00:30", REPEATED,
                 id="dublin_negative_dst_autumn_repeat_0130"),
    pytest.param("Europe/Dublin", "2027-10-31", "02:00", "2027-10-31T02:00", SHOWN_ONCE,
                 id="dublin_negative_dst_autumn_0200_is_not_ambiguous"),
    pytest.param("Pacific/Apia", "2011-12-30", "00:00", "2011-12-30T10:00", SKIPPED,
                 id="apia_skipped_day_midnight"),
    pytest.param("Pacific/Apia", "2011-12-30", "03:00", "2011-12-30T13:00", SKIPPED,
                 id="apia_skipped_day_0300"),
    pytest.param("Pacific/Apia", "2011-12-29", "23:55", "2011-12-30T09:55", SHOWN_ONCE,
                 id="apia_last_minutes_before_skipped_day"),
    pytest.param("America/St_Johns", "2009-11-01", "00:00", "2009-11-01T02:30", REPEATED,
                 id="st_johns_repeat_across_midnight_0000"),
    pytest.param("America/St_Johns", "2009-10-31", "23:30", "2009-11-01T02:00", REPEATED,
                 id="st_johns_repeat_across_midnight_2330"),
]  # fmt: skip


@pytest.mark.parametrize(("zone", "day", "wall", "expected", "kind"), RESOLVE_CASES)
def test_wall_time_resolves_by_the_compatible_rule(
    zone: str, day: str, wall: str, expected: str, kind: WallTimeKind
) -> None:
    local_day, wall_time = date.fromisoformat(day), time.fromisoformat(wall)
    assert resolve_wall_time(local_day, wall_time, zone) == utc(expected)
    assert describe_wall_time(local_day, wall_time, zone).kind is kind


# zone, schedule, local start day, days, every slot as (key, UTC instant)
SLOT_CASES = [
    pytest.param("Europe/Amsterdam", ["02:00", "03:00"], "2027-03-28", 1,
                 [("2027-03-28T03:00", "2027-03-28T01:00")],
                 id="amsterdam_spring_0200_and_0300_are_one_slot_named_0300"),
    pytest.param("Europe/Amsterdam", ["02:30"], "2027-03-27", 3,
                 [("2027-03-27T02:30", "2027-03-27T01:30"),
                  ("2027-03-28T02:30", "2027-03-28T01:30"),
                  ("2027-03-29T02:30", "2027-03-29T00:30")],
                 id="amsterdam_spring_gap_0230_is_not_skipped"),
    pytest.param("Europe/Amsterdam", ["02:30", "03:10"], "2027-03-28", 1,
                 [("2027-03-28T03:10", "2027-03-28T01:10"),
                  ("2027-03-28T02:30", "2027-03-28T01:30")],
                 id="amsterdam_spring_ordered_by_instant_not_label"),
    pytest.param("Europe/Amsterdam", ["02:30"], "2027-10-31", 1,
                 [("2027-10-31T02:30", "2027-10-31T00:30")],
                 id="amsterdam_autumn_repeat_0230_runs_once"),
    pytest.param("Europe/Amsterdam", ["02:00", "03:00"], "2027-10-31", 1,
                 [("2027-10-31T02:00", "2027-10-31T00:00"),
                  ("2027-10-31T03:00", "2027-10-31T02:00")],
                 id="amsterdam_autumn_0300_is_its_own_slot"),
    pytest.param("America/New_York", ["02:00", "03:00"], "2027-03-14", 1,
                 [("2027-03-14T03:00", "2027-03-14T07:00")],
                 id="new_york_spring_0200_and_0300_are_one_slot"),
    pytest.param("America/New_York", ["01:30"], "2027-11-07", 1,
                 [("2027-11-07T01:30", "2027-11-07T05:30")],
                 id="new_york_autumn_repeat_runs_once"),
    pytest.param("Australia/Lord_Howe", ["02:00", "02:30"], "2027-10-03", 1,
                 [("2027-10-03T02:30", "2027-10-02T15:30")],
                 id="lord_howe_half_hour_gap_0200_and_0230_are_one_slot"),
    pytest.param("Australia/Lord_Howe", ["01:30", "01:45"], "2027-04-04", 1,
                 [("2027-04-04T01:30", "2027-04-03T14:30"),
                  ("2027-04-04T01:45", "2027-04-03T14:45")],
                 id="lord_howe_half_hour_repeat_runs_once_each"),
    pytest.param("America/Santiago", ["23:55", "00:00", "01:00"], "2027-09-04", 2,
                 [("2027-09-04T00:00", "2027-09-04T04:00"),
                  ("2027-09-04T01:00", "2027-09-04T05:00"),
                  ("2027-09-04T23:55", "2027-09-05T03:55"),
                  ("2027-09-05T01:00", "2027-09-05T04:00"),
                  ("2027-09-05T23:55", "2027-09-06T02:55")],
                 id="santiago_missing_midnight_merges_with_0100"),
    pytest.param("America/Santiago", ["23:30"], "2027-04-03", 1,
                 [("2027-04-03T23:30", "2027-04-04T02:30")],
                 id="santiago_autumn_repeat_before_midnight_runs_once"),
    pytest.param("Europe/Dublin", ["01:00", "02:00"], "2027-03-28", 1,
                 [("2027-03-28T02:00", "2027-03-28T01:00")],
                 id="dublin_negative_dst_spring_0100_and_0200_are_one_slot"),
    pytest.param("Europe/Dublin", ["01:30"], "2027-10-31", 1,
                 [("2027-10-31T01:30", "2027-10-31T00:30")],
                 id="dublin_negative_dst_autumn_repeat_runs_once"),
    pytest.param("Pacific/Apia", ["03:00"], "2011-12-28", 5,
                 [("2011-12-28T03:00", "2011-12-28T13:00"),
                  ("2011-12-29T03:00", "2011-12-29T13:00"),
                  ("2011-12-31T03:00", "2011-12-30T13:00"),
                  ("2012-01-01T03:00", "2011-12-31T13:00")],
                 id="apia_no_slot_for_the_day_that_never_happened"),
    pytest.param("Pacific/Apia", ["23:55", "00:00"], "2011-12-29", 3,
                 [("2011-12-29T00:00", "2011-12-29T10:00"),
                  ("2011-12-29T23:55", "2011-12-30T09:55"),
                  ("2011-12-31T00:00", "2011-12-30T10:00"),
                  ("2011-12-31T23:55", "2011-12-31T09:55")],
                 id="apia_nothing_lost_around_the_skipped_day"),
]  # fmt: skip


@pytest.mark.parametrize(("zone", "times", "first_day", "days", "expected"), SLOT_CASES)
def test_slots_around_transitions(
    zone: str, times: list[str], first_day: str, days: int, expected: list[tuple[str, str]]
) -> None:
    start_day = date.fromisoformat(first_day)
    start = resolve_wall_time(start_day, time(0), zone)
    end = resolve_wall_time(start_day + timedelta(days=days), time(0), zone)
    slots = slots_between(times, start=start, end=end, tz=zone)
    assert [(slot.key, slot.at) for slot in slots] == [(key, utc(at)) for key, at in expected]


# zone, schedule, now (UTC), the key of the due slot or None; catch-up is the default 15 minutes
DUE_CASES = [
    pytest.param("Europe/Amsterdam", ["02:30"], "2027-03-28T01:35", "2027-03-28T02:30",
                 id="amsterdam_spring_gap_0230_due_at_0335_cest"),
    pytest.param("Europe/Amsterdam", ["02:30"], "2027-03-28T00:35", None,
                 id="amsterdam_spring_gap_0230_not_due_an_hour_early"),
    pytest.param("Europe/Amsterdam", ["02:30"], "2027-10-31T00:35", "2027-10-31T02:30",
                 id="amsterdam_autumn_0230_due_at_first_instant"),
    pytest.param("Europe/Amsterdam", ["02:30"], "2027-10-31T01:35", None,
                 id="amsterdam_autumn_0230_not_due_at_second_instant"),
    pytest.param("America/St_Johns", ["00:00"], "2009-11-01T02:40", "2009-11-01T00:00",
                 id="st_johns_slot_dated_after_the_date_now_shows"),
    pytest.param("Pacific/Apia", ["23:55"], "2011-12-30T10:05", "2011-12-29T23:55",
                 id="apia_slot_dated_two_days_before_the_date_now_shows"),
    pytest.param("America/Santiago", ["00:00"], "2027-09-05T04:10", "2027-09-05T00:00",
                 id="santiago_missing_midnight_due_at_0110"),
]  # fmt: skip


@pytest.mark.parametrize(("zone", "times", "now", "expected"), DUE_CASES)
def test_due_slot_around_transitions(
    zone: str, times: list[str], now: str, expected: str | None
) -> None:
    slot = due_slot(times, now=utc(now), tz=zone)
    assert (slot.key if slot else None) == expected


@pytest.mark.parametrize(
    ("zone", "wall", "now", "slot_day", "shown_day"),
    [
        pytest.param("America/St_Johns", "00:00", "2009-11-01T02:40", "2009-11-01", "2009-10-31",
                     id="st_johns_slot_one_day_ahead"),
        pytest.param("Pacific/Apia", "23:55", "2011-12-30T10:05", "2011-12-29", "2011-12-31",
                     id="apia_slot_two_days_behind"),
    ],
)  # fmt: skip
def test_the_due_slots_date_and_the_date_now_shows_differ(
    zone: str, wall: str, now: str, slot_day: str, shown_day: str
) -> None:
    # A walk over dates on one side of "today" only, or one day back only, misses these slots.
    slot = due_slot([wall], now=utc(now), tz=zone)
    assert slot is not None
    assert slot.day == date.fromisoformat(slot_day)
    assert utc(now).astimezone(ZoneInfo(zone)).date() == date.fromisoformat(shown_day)


def test_a_merged_slot_runs_once() -> None:
    times = ["02:00", "03:00"]
    now = utc("2027-03-28T01:05")
    slot = due_slot(times, now=now, tz="Europe/Amsterdam")
    assert slot is not None
    assert slot.key == "2027-03-28T03:00"
    assert due_slot(times, now=now, tz="Europe/Amsterdam", last_consumed=slot.at) is None


def test_the_latest_open_slot_is_due_by_instant_not_by_label() -> None:
    # 03:10 CEST (01:10Z) and the shifted 02:30 (01:30Z) are both open at 01:32Z; 02:30 is later.
    slot = due_slot(
        ["02:30", "03:10"],
        now=utc("2027-03-28T01:32"),
        tz="Europe/Amsterdam",
        catch_up=timedelta(minutes=30),
    )
    assert slot is not None
    assert slot.key == "2027-03-28T02:30"
