"""The planner's invariants over random zones, schedules and instants across several decades.

The brute-force oracle below is deliberately naive and independent of the planner's day tables:
it resolves every scheduled wall time on a wide band of dates with `resolve_wall_time`, groups
by instant and names each group as the planner must: wall times on one instant are one slot,
named by the wall time the clock really shows.
"""

from __future__ import annotations

import bisect
import random
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, available_timezones

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared_planner import (
    Slot,
    WallTimeKind,
    describe_wall_time,
    due_slot,
    next_slot,
    plan_slots,
    resolve_wall_time,
    slot_key,
    slots_between,
)

ZONES = sorted(available_timezones())
GRID = [time(h, m) for h in range(24) for m in range(0, 60, 5)]

zones = st.sampled_from(ZONES)
# Some schedules are dense on the hour, so gaps often merge two of their times into one slot.
schedules = (
    st.lists(st.sampled_from(GRID), min_size=1, max_size=12, unique=True)
    | st.lists(st.sampled_from(GRID[::6]), min_size=8, max_size=48, unique=True)
).map(lambda walls: [f"{w:%H:%M}" for w in walls])
# Mostly the decades agents live in, and now and then any year the planner takes: instants before
# 1970 are negative Unix seconds, and before the 1970s many zones' offsets had seconds in them.
instants = st.datetimes(
    min_value=datetime(1995, 1, 1), max_value=datetime(2037, 12, 31), timezones=st.just(UTC)
) | st.datetimes(
    min_value=datetime(1901, 1, 3), max_value=datetime(8998, 12, 29), timezones=st.just(UTC)
)
# Transitions where dates, gaps and repeats are at their strangest, so random search visits them.
TRANSITIONS = [
    ("Europe/Amsterdam", datetime(2027, 3, 28, 1, tzinfo=UTC)),
    ("Europe/Amsterdam", datetime(2027, 10, 31, 1, tzinfo=UTC)),
    ("Australia/Lord_Howe", datetime(2027, 10, 2, 15, 30, tzinfo=UTC)),
    ("America/Santiago", datetime(2027, 9, 5, 4, tzinfo=UTC)),
    ("America/St_Johns", datetime(2009, 11, 1, 2, 31, tzinfo=UTC)),
    ("Antarctica/Casey", datetime(2010, 3, 4, 15, tzinfo=UTC)),
    ("Pacific/Apia", datetime(2011, 12, 30, 10, tzinfo=UTC)),
    ("Europe/Dublin", datetime(2027, 3, 28, 1, tzinfo=UTC)),
    # Offsets with seconds: Amsterdam at +00:19:32 until 1937, Monrovia at -00:44:30 until 1972.
    ("Europe/Amsterdam", datetime(1937, 6, 30, 22, tzinfo=UTC)),
    ("Africa/Monrovia", datetime(1972, 1, 7, 0, 44, 30, tzinfo=UTC)),
    ("Europe/Amsterdam", datetime(1901, 6, 1, 2, 40, 28, tzinfo=UTC)),
]
zones_and_instants = st.tuples(zones, instants) | st.tuples(
    st.sampled_from(TRANSITIONS), st.integers(-36 * 60, 36 * 60)
).map(lambda case: (case[0][0], case[0][1] + timedelta(minutes=case[1])))
catch_ups = st.sampled_from([5, 15, 60, 120]).map(lambda minutes: timedelta(minutes=minutes))

properties = settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])


def oracle_slots(times: list[str], zone: str, start: datetime, end: datetime) -> list[Slot]:
    """Every slot with start <= at < end, by brute force over dates well beyond the range."""
    walls = [time.fromisoformat(value) for value in times]
    groups: dict[datetime, list[tuple[date, time]]] = {}
    day = start.date() - timedelta(days=3)
    while day <= end.date() + timedelta(days=3):
        for wall in walls:
            groups.setdefault(resolve_wall_time(day, wall, zone), []).append((day, wall))
        day += timedelta(days=1)
    slots = []
    for at in sorted(groups):
        if not start <= at < end:
            continue
        shown = at.astimezone(ZoneInfo(zone))
        showing = (shown.date(), shown.time())
        label_day, wall = showing if showing in groups[at] else min(groups[at])
        slots.append(Slot(key=slot_key(label_day, wall), day=label_day, wall=wall, at=at))
    return slots


last_consumed_choices = st.none() | st.timedeltas(timedelta(0), timedelta(hours=30))


def _last_consumed(now: datetime, back: timedelta | None) -> datetime | None:
    return None if back is None else now - back


@properties
@given(place=zones_and_instants, times=schedules, catch_up=catch_ups, back=last_consumed_choices)
def test_a_due_slot_is_always_inside_its_window(
    place: tuple[str, datetime], times: list[str], catch_up: timedelta, back: timedelta | None
) -> None:
    zone, now = place
    last_consumed = _last_consumed(now, back)
    slot = due_slot(times, now=now, tz=zone, catch_up=catch_up, last_consumed=last_consumed)
    if slot is not None:
        assert slot.at <= now < slot.at + catch_up


@properties
@given(place=zones_and_instants, times=schedules, catch_up=catch_ups, back=last_consumed_choices)
def test_due_slot_never_returns_a_slot_at_or_before_last_consumed(
    place: tuple[str, datetime], times: list[str], catch_up: timedelta, back: timedelta | None
) -> None:
    zone, now = place
    last_consumed = now - (back or timedelta(0))
    slot = due_slot(times, now=now, tz=zone, catch_up=catch_up, last_consumed=last_consumed)
    assert slot is None or slot.at > last_consumed


@properties
@given(place=zones_and_instants, times=schedules, catch_up=catch_ups, back=last_consumed_choices)
def test_due_slot_is_the_latest_open_unconsumed_slot_found_by_brute_force(
    place: tuple[str, datetime], times: list[str], catch_up: timedelta, back: timedelta | None
) -> None:
    zone, now = place
    last_consumed = _last_consumed(now, back)
    slot = due_slot(times, now=now, tz=zone, catch_up=catch_up, last_consumed=last_consumed)
    open_slots = [
        candidate
        for candidate in oracle_slots(times, zone, now - catch_up, now + timedelta(microseconds=1))
        if candidate.at > now - catch_up and (last_consumed is None or candidate.at > last_consumed)
    ]
    assert slot == (open_slots[-1] if open_slots else None)


@properties
@given(place=zones_and_instants, times=schedules, days=st.integers(1, 9))
def test_every_scheduled_wall_time_of_every_day_is_in_exactly_one_slot(
    place: tuple[str, datetime], times: list[str], days: int
) -> None:
    # Never skipped, never twice: each (day, wall time) whose instant falls in the range is
    # behind exactly one slot, and each slot's key is one of its own wall times.
    zone, start = place
    end = start + timedelta(days=days)
    planned = plan_slots(times, start=start, end=end, tz=zone)
    behind = [(wall.day, wall.wall) for entry in planned for wall in entry.merged]
    expected = set()
    day = start.date() - timedelta(days=3)
    while day <= end.date() + timedelta(days=3):
        for value in times:
            wall = time.fromisoformat(value)
            if start <= resolve_wall_time(day, wall, zone) < end:
                expected.add((day, wall))
        day += timedelta(days=1)
    assert len(behind) == len(set(behind))
    assert set(behind) == expected
    for entry in planned:
        assert (entry.slot.day, entry.slot.wall) in {(w.day, w.wall) for w in entry.merged}
        assert all(w.at == entry.slot.at for w in entry.merged)


@properties
@given(place=zones_and_instants, times=schedules, hours=st.integers(0, 24 * 9))
def test_slots_between_matches_brute_force_one_per_instant_in_order(
    place: tuple[str, datetime], times: list[str], hours: int
) -> None:
    zone, start = place
    end = start + timedelta(hours=hours)
    slots = slots_between(times, start=start, end=end, tz=zone)
    assert slots == oracle_slots(times, zone, start, end)
    instants_ = [slot.at for slot in slots]
    assert instants_ == sorted(set(instants_))


@properties
@given(place=zones_and_instants, times=schedules)
def test_next_slot_is_the_first_slot_after(place: tuple[str, datetime], times: list[str]) -> None:
    zone, after = place
    slot = next_slot(times, after=after, tz=zone)
    assert slot.at > after
    assert slots_between(times, start=after + timedelta(microseconds=1), end=slot.at, tz=zone) == []
    assert slots_between(
        times, start=slot.at, end=slot.at + timedelta(microseconds=1), tz=zone
    ) == [slot]


@properties
@given(place=zones_and_instants, wall=st.sampled_from(GRID))
def test_a_wall_time_that_shows_runs_at_its_first_showing_and_one_that_does_not_is_shifted(
    place: tuple[str, datetime], wall: time
) -> None:
    zone, moment = place
    tz = ZoneInfo(zone)
    day = moment.date()
    naive = datetime.combine(day, wall)
    # Every offset the zone used within a day and a half either side, tried as "naive - offset".
    probes = [naive.replace(tzinfo=UTC) + timedelta(minutes=30 * k) for k in range(-72, 73)]
    offsets = {probe.astimezone(tz).utcoffset() for probe in probes}
    showing = sorted(
        candidate
        for offset in offsets
        if offset is not None
        for candidate in [(naive - offset).replace(tzinfo=UTC)]
        if candidate.astimezone(tz).replace(tzinfo=None) == naive
    )
    described = describe_wall_time(day, wall, zone)
    assert described.at == resolve_wall_time(day, wall, zone)
    if showing:
        assert described.at == showing[0]
        assert described.kind is (
            WallTimeKind.REPEATED if len(showing) > 1 else WallTimeKind.SHOWN_ONCE
        )
    else:
        assert described.kind is WallTimeKind.SKIPPED
        shift = described.shift
        assert timedelta(0) < shift <= timedelta(days=1)
        assert described.shown.replace(tzinfo=None) == naive + shift
        # Shifted by exactly the gap: the offset jumped by `shift` between the two instants.
        before = (described.at - shift).astimezone(tz).utcoffset()
        after = described.at.astimezone(tz).utcoffset()
        assert before is not None and after is not None
        assert after - before == shift


@settings(deadline=None, max_examples=10, suppress_health_check=[HealthCheck.too_slow])
@given(
    zone=zones,
    times=st.lists(st.sampled_from(GRID), min_size=1, max_size=4, unique=True).map(
        lambda walls: [f"{w:%H:%M}" for w in walls]
    ),
    year=st.integers(1996, 2036),
    catch_up=st.sampled_from([timedelta(minutes=15), timedelta(minutes=60)]),
    seed=st.integers(0, 2**32),
)
def test_a_year_walked_minute_by_minute_runs_each_slot_at_most_once_and_misses_none(
    zone: str, times: list[str], year: int, catch_up: timedelta, seed: int
) -> None:
    rng = random.Random(seed)
    start = datetime(year, 1, 1, tzinfo=UTC)
    end = datetime(year + 1, 1, 1, tzinfo=UTC)
    # Visits a minute or more apart, sometimes longer than the window (an agent that was down).
    max_step = int(catch_up / timedelta(minutes=1)) * 2
    visits = []
    now = start
    while now < end:
        visits.append(now)
        now += timedelta(minutes=rng.randint(1, max_step), seconds=rng.randint(0, 59))
    consumed: list[Slot] = []
    last_consumed: datetime | None = None
    for visit in visits:
        slot = due_slot(times, now=visit, tz=zone, last_consumed=last_consumed, catch_up=catch_up)
        if slot is not None:
            consumed.append(slot)
            last_consumed = slot.at
    labels = [(slot.day, slot.wall) for slot in consumed]
    assert len(labels) == len(set(labels)), "a wall time ran twice on one local day"
    assert [s.at for s in consumed] == sorted({s.at for s in consumed})
    consumed_at = [slot.at for slot in consumed]
    for slot in slots_between(times, start=start - catch_up, end=end, tz=zone):
        visited = any(slot.at <= visit < slot.at + catch_up for visit in _near(visits, slot.at))
        if visited:
            # It ran, or a later slot ran while it was still open (and superseded it).
            assert any(slot.at <= at < slot.at + catch_up for at in consumed_at), slot.key


def _near(visits: list[datetime], at: datetime) -> list[datetime]:
    index = bisect.bisect_left(visits, at)
    return visits[index : index + 200]
