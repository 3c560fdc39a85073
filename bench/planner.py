"""Benchmark: `shared_planner.due_slot` for a fleet, beside APScheduler 3's CronTrigger.

    PYTHONPATH=. python bench/planner.py [--agents 100000] [--peer-agents 20000] [--seed 2027]

One `now`, one zone (the platform's), `agents` random schedules of 1-12 grid times. The planner
answers "which slot is due?" for every agent. The peer answers the same question the way a user of
APScheduler 3 would: the trigger's next fire time after `now - catch-up`, due if it is not after
`now`. Both figures are measured in the same run, so the ratio holds on any machine; the peer is
run on a sample (it is slower) and the output says so. Then every daylight-saving case in the
planner's test tables is put to the peer, and the ones it gets wrong are counted and named.
"""

from __future__ import annotations

import argparse
import platform
import random
import sys
import time as timer
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import cast
from zoneinfo import ZoneInfo

from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger

from shared_planner import due_slot, parse_times, resolve_wall_time
from shared_planner.slots import _day  # only to measure a cold cache
from tests.shared_planner.test_daylight_saving import DUE_CASES, RESOLVE_CASES, SLOT_CASES

ZONE = "Europe/Amsterdam"
NOW = datetime(2027, 1, 15, 2, 5, tzinfo=UTC)  # 03:05 CET: the default 03:00 slot is open
CATCH_UP = timedelta(minutes=15)
GRID = [time(hour, minute) for hour in range(24) for minute in range(0, 60, 5)]
REPEATS = 3  # best of three: the machine is shared and noisy


def random_schedules(count: int, seed: int) -> list[tuple[time, ...]]:
    rng = random.Random(seed)
    schedules = []
    for _ in range(count):
        walls = rng.sample(GRID, rng.randint(1, 12))
        schedules.append(parse_times([f"{wall:%H:%M}" for wall in walls]))
    return schedules


def peer_trigger(schedule: Sequence[time], zone: ZoneInfo) -> OrTrigger:
    return OrTrigger(
        [CronTrigger(hour=wall.hour, minute=wall.minute, timezone=zone) for wall in schedule]
    )


def peer_due(trigger: OrTrigger, now: datetime) -> datetime | None:
    """The first fire still inside the window (now - catch-up, now], if any.

    The window opens one second after `now - catch-up` because a slot at exactly that instant has
    just closed (fires fall on whole minutes). The peer finds the earliest open fire where the
    planner picks the latest, so only due-or-not is compared across the fleet.
    """
    opens = now - CATCH_UP + timedelta(seconds=1)
    fire = trigger.get_next_fire_time(None, opens)
    if fire is None:
        return None
    fire_utc: datetime = fire.astimezone(UTC)
    return fire_utc if opens <= fire_utc <= now else None


def best_rate(run: Callable[[], object], count: int) -> tuple[float, object]:
    best = float("inf")
    result: object = None
    for _ in range(REPEATS):
        started = timer.perf_counter()
        result = run()
        best = min(best, timer.perf_counter() - started)
    return count / best, result


def peer_fires(
    times: Sequence[str], zone: ZoneInfo, start: datetime, end: datetime
) -> list[datetime]:
    """Every fire of the peer in [start, end), stepping by instants (with a guard: it can loop)."""
    trigger = peer_trigger(parse_times(times), zone)
    fires: list[datetime] = []
    cursor = start
    for _ in range(1000):
        fire = trigger.get_next_fire_time(None, cursor)
        if fire is None or fire.astimezone(UTC) >= end:
            break
        fire_utc = fire.astimezone(UTC)
        fires.append(fire_utc)
        cursor = fire_utc + timedelta(seconds=1)
    return fires


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def dst_cases() -> list[tuple[str, str, bool, str]]:
    """(table, case id, peer right?, what happened) for every case of the planner's tables."""
    results = []
    for case in RESOLVE_CASES:
        zone_name, day, wall, expected, _ = cast(tuple[str, str, str, str, object], case.values)
        zone = ZoneInfo(zone_name)
        start = resolve_wall_time(date.fromisoformat(day), time(0), zone)
        fires = peer_fires([wall], zone, start, start + timedelta(days=2))
        got = fires[0] if fires else None
        what = f"peer fires at {got:%Y-%m-%d %H:%MZ}, planner at {expected}Z" if got else "never"
        results.append(("resolve", str(case.id), got == utc(expected), what))
    for case in SLOT_CASES:
        zone_name, times, first_day, days, slots = cast(
            tuple[str, list[str], str, int, list[tuple[str, str]]], case.values
        )
        zone = ZoneInfo(zone_name)
        start_day = date.fromisoformat(first_day)
        start = resolve_wall_time(start_day, time(0), zone)
        end = resolve_wall_time(start_day + timedelta(days=days), time(0), zone)
        fires = peer_fires(times, zone, start, end)
        expected_fires = [utc(at) for _, at in slots]
        what = f"peer fires {len(fires)} times for {len(expected_fires)} slots"
        results.append(("slots", str(case.id), fires == expected_fires, what))
    for case in DUE_CASES:
        zone_name, times, now, _ = cast(tuple[str, list[str], str, object], case.values)
        zone = ZoneInfo(zone_name)
        now_utc = utc(now)
        ours = due_slot(times, now=now_utc, tz=zone)
        theirs = peer_due(peer_trigger(parse_times(times), zone), now_utc)
        what = f"peer says {'due' if theirs else 'not due'}, planner {'due' if ours else 'not due'}"
        results.append(("due", str(case.id), (ours.at if ours else None) == theirs, what))
    return results


TABLES = {
    "resolve": "one wall time on one day: the instant it runs at",
    "slots": "every slot over a few days: runs once, never skipped",
    "due": "due or not at one instant",
}


def row(what: str, count: str, figure: str | float) -> None:
    shown = f"{figure:,.0f}" if isinstance(figure, float) else figure
    print(f"| {what} | {count} | {shown} |")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--agents", type=int, default=100_000)
    parser.add_argument("--peer-agents", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=2027)
    args = parser.parse_args(argv)
    zone = ZoneInfo(ZONE)
    schedules = random_schedules(args.agents, args.seed)
    sample = schedules[: args.peer_agents]
    triggers = [peer_trigger(schedule, zone) for schedule in sample]

    def planner_all() -> list[datetime | None]:
        answers = []
        for schedule in schedules:
            slot = due_slot(schedule, now=NOW, tz=zone, catch_up=CATCH_UP)
            answers.append(slot.at if slot else None)
        return answers

    def planner_cold() -> int:
        for schedule in sample:
            _day.cache_clear()
            due_slot(schedule, now=NOW, tz=zone, catch_up=CATCH_UP)
        return 0

    def peer_all() -> list[datetime | None]:
        return [peer_due(trigger, NOW) for trigger in triggers]

    planner_rate, planner_answers = best_rate(planner_all, len(schedules))
    cold_rate, _ = best_rate(planner_cold, len(sample))
    peer_rate, peer_answers = best_rate(peer_all, len(sample))
    assert isinstance(planner_answers, list) and isinstance(peer_answers, list)
    agree = sum(
        (ours is None) == (theirs is None)
        for ours, theirs in zip(planner_answers, peer_answers, strict=False)
    )
    due_count = sum(answer is not None for answer in planner_answers)

    ratio, cold_ratio = planner_rate / peer_rate, cold_rate / peer_rate
    peer_name = "APScheduler 3 `CronTrigger` per time in an `OrTrigger`"
    print(f"nachtwacht planner benchmark: Python {platform.python_version()}, {platform.machine()}")
    print(
        f"now {NOW:%Y-%m-%dT%H:%MZ} in {ZONE}, catch-up {CATCH_UP.seconds // 60} min, "
        f"schedules of 1-12 random five-minute times (seed {args.seed}), best of {REPEATS}"
    )
    print()
    row("what", "agents", "agents/s")
    row("---", "---:", "---:")
    row("`due_slot`, wall times cached (a running program)", f"{len(schedules):,}", planner_rate)
    row("`due_slot`, cache cleared before every agent", f"{len(sample):,} (sample)", cold_rate)
    row(f"{peer_name}, next fire time", f"{len(sample):,} (sample)", peer_rate)
    print()
    print(f"ratio: due_slot is {ratio:.1f}x the peer ({cold_ratio:.1f}x with a cold cache)")
    print(
        f"{due_count:,} of {len(schedules):,} agents are due; on the sample the peer agrees on "
        f"due or not for {agree:,} of {len(sample):,} (no transition near this now)"
    )
    print()
    results = dst_cases()
    row(
        "daylight-saving cases (tests/shared_planner/test_daylight_saving.py)",
        "cases",
        "peer wrong",
    )
    row("---", "---:", "---:")
    for table, title in TABLES.items():
        rows = [result for result in results if result[0] == table]
        row(title, str(len(rows)), str(sum(not right for _, _, right, _ in rows)))
    row("all", str(len(results)), str(sum(not right for _, _, right, _ in results)))
    print()
    for table, case_id, right, what in results:
        if not right:
            print(f"peer wrong: {table}/{case_id}: {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
