"""The worlds' held night clock: it stands while a world is set up, runs from `begin()`, never
steps back, and a host's wrong clock made from it begins with it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ground.clock import parse_fake_clock
from nachtwacht.demo_world.clocks import NightClock
from tests.worlds.waiting import wait_until

START = datetime(2026, 11, 30, 1, 57, tzinfo=UTC)


def test_a_held_clock_stands_until_begin_and_then_runs_on_from_its_start(tmp_path: Path) -> None:
    clock = NightClock.held(START, begins=tmp_path / "begins", speed=60.0)
    child = parse_fake_clock(clock.setting, read_at=0.0)  # what another process builds
    assert clock.now() == child.now() == START
    clock.begin()
    first = clock.now()
    assert START <= first < START + timedelta(minutes=1)  # on from the start, never before it
    wait_until(lambda: child.now() > START, what="the other process's clock to run on")
    anchor = (tmp_path / "begins").read_text()
    clock.begin()  # a second begin changes nothing
    assert (tmp_path / "begins").read_text() == anchor


def test_a_shifted_clock_begins_together_with_its_night(tmp_path: Path) -> None:
    clock = NightClock.held(START, begins=tmp_path / "begins", speed=60.0)
    wrong = clock.shifted(timedelta(hours=5))
    assert wrong.now() == START + timedelta(hours=5)
    clock.begin()
    assert wrong.now() - clock.now() == pytest.approx(timedelta(hours=5), abs=timedelta(seconds=5))


def test_a_held_clock_refuses_a_file_that_exists_already(tmp_path: Path) -> None:
    (tmp_path / "begins").write_text("1.0")
    with pytest.raises(ValueError, match="exists already"):
        NightClock.held(START, begins=tmp_path / "begins")


def test_waiting_for_an_instant_begins_a_held_clock(tmp_path: Path) -> None:
    clock = NightClock.held(START, begins=tmp_path / "begins", speed=600.0)
    clock.wait_until(START + timedelta(seconds=30))  # 0.05 real seconds once it runs
    assert clock.now() >= START + timedelta(seconds=30)
