"""The one clock per program: fake-clock settings that name their errors, agree across processes,
and make waits follow the fast clock."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ground import clock as clock_module
from ground.clock import (
    FAKE_CLOCK_ENV,
    ClockConfigError,
    FakeClock,
    SystemClock,
    clock_from_env,
    parse_fake_clock,
)

REPO = Path(__file__).resolve().parents[2]
SETTING = "2026-10-25T00:50:00Z,anchor=1764465000.0,speed=60"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param(
            "yesterday",
            f"{FAKE_CLOCK_ENV}: 'yesterday' is not an ISO 8601 instant "
            "(expected e.g. 2026-10-25T00:50:00Z)",
            id="not_an_instant",
        ),
        pytest.param(
            "2026-10-25T00:50:00",
            f"{FAKE_CLOCK_ENV}: '2026-10-25T00:50:00' has no time zone "
            "(expected e.g. 2026-10-25T00:50:00Z)",
            id="naive_instant",
        ),
        pytest.param(
            "2026-10-25T00:50:00Z,speed=fast",
            f"{FAKE_CLOCK_ENV}: speed='fast' is not a number",
            id="speed_not_a_number",
        ),
        pytest.param(
            "2026-10-25T00:50:00Z,speed=0",
            f"{FAKE_CLOCK_ENV}: speed: 0.0 must be a positive, finite number",
            id="speed_zero",
        ),
        pytest.param(
            "2026-10-25T00:50:00Z,speed=-60",
            f"{FAKE_CLOCK_ENV}: speed: -60.0 must be a positive, finite number",
            id="speed_negative",
        ),
        pytest.param(
            "2026-10-25T00:50:00Z,speed=inf",
            f"{FAKE_CLOCK_ENV}: speed: inf must be a positive, finite number",
            id="speed_infinite",
        ),
        pytest.param(
            "2026-10-25T00:50:00Z,speed=nan",
            f"{FAKE_CLOCK_ENV}: speed: nan must be a positive, finite number",
            id="speed_nan",
        ),
        pytest.param(
            "2026-10-25T00:50:00Z,anchor=nan",
            f"{FAKE_CLOCK_ENV}: anchor: nan must be a finite Unix time",
            id="anchor_nan",
        ),
        pytest.param(
            "2026-10-25T00:50:00Z,pace=60",
            f"{FAKE_CLOCK_ENV}: 'pace=60' is not understood "
            "(expected anchor=UNIX_TIME, begins=FILE or speed=N)",
            id="unknown_option",
        ),
        pytest.param(
            "2026-10-25T00:50:00Z,speed=2,speed=60",
            f"{FAKE_CLOCK_ENV}: speed is given twice (expected it once)",
            id="option_twice",
        ),
        pytest.param(
            "2026-10-25T00:50:00Z,anchor=5,begins=/tmp/night/clock",
            f"{FAKE_CLOCK_ENV}: anchor and begins are both given (expected one of them)",
            id="anchor_and_begins",
        ),
        pytest.param(
            "2026-10-25T00:50:00Z,begins=night/clock",
            f"{FAKE_CLOCK_ENV}: begins: 'night/clock' must be an absolute file path "
            "without a comma",
            id="begins_relative",
        ),
        pytest.param(
            "9999-12-31T23:59:59Z",
            f"{FAKE_CLOCK_ENV}: start: '9999-12-31T23:59:59+00:00' is out of range "
            "(expected an instant in the years 1901 to 8998)",
            id="start_past_the_years_planned",
        ),
        pytest.param(
            "1900-01-01T00:00:00Z",
            f"{FAKE_CLOCK_ENV}: start: '1900-01-01T00:00:00+00:00' is out of range "
            "(expected an instant in the years 1901 to 8998)",
            id="start_before_the_years_planned",
        ),
    ],
)
def test_a_bad_setting_names_the_value_and_what_was_expected(value: str, message: str) -> None:
    with pytest.raises(ClockConfigError) as caught:
        parse_fake_clock(value, read_at=0.0)
    assert str(caught.value) == message


def test_two_clocks_built_from_one_setting_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    first = parse_fake_clock(SETTING, read_at=1_000.0)
    second = parse_fake_clock(SETTING, read_at=2_000_000_000.0)  # read much later, elsewhere
    monkeypatch.setattr(clock_module.time, "time", lambda: 1764465000.0 + 10.0)
    assert first.now() == second.now() == datetime(2026, 10, 25, 1, 0, tzinfo=UTC)


def test_the_setting_runs_speed_times_as_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = parse_fake_clock(SETTING, read_at=0.0)
    monkeypatch.setattr(clock_module.time, "time", lambda: 1764465000.0 + 30.0)
    assert fake.now() == datetime(2026, 10, 25, 1, 20, tzinfo=UTC)  # 30 s x 60 = 30 min


def test_without_anchor_the_moment_of_reading_is_the_anchor() -> None:
    fake = parse_fake_clock("2026-10-25T00:50:00Z,speed=60", read_at=1234.5)
    assert fake.anchor == 1234.5


def test_a_clocks_setting_reproduces_it_exactly() -> None:
    original = FakeClock(
        start=datetime(2026, 10, 25, 0, 50, 0, 123456, tzinfo=UTC), anchor=1764465000.25, speed=60.0
    )
    assert parse_fake_clock(original.setting(), read_at=0.0) == original


def test_a_child_process_given_the_same_setting_builds_the_same_clock() -> None:
    # Started later, in another process: equal clocks show equal times at every real instant.
    script = (
        "from ground.clock import clock_from_env\n"
        "clock = clock_from_env()\n"
        "print(clock.start.isoformat(), repr(clock.anchor), repr(clock.speed))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), FAKE_CLOCK_ENV: SETTING}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    start, anchor, speed = done.stdout.split()
    child = FakeClock(start=datetime.fromisoformat(start), anchor=float(anchor), speed=float(speed))
    assert child == parse_fake_clock(SETTING, read_at=0.0)


def test_speed_scales_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(clock_module.time, "sleep", slept.append)
    fake = parse_fake_clock(SETTING, read_at=0.0)
    fake.sleep(60.0)
    fake.sleep(0.0)
    fake.sleep(-5.0)
    assert slept == [1.0]
    assert fake.real_seconds(900.0) == 15.0


def test_the_system_clock_sleeps_real_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(clock_module.time, "sleep", slept.append)
    SystemClock().sleep(2.5)
    assert slept == [2.5]
    assert SystemClock().real_seconds(2.5) == 2.5


def test_the_environment_chooses_the_clock() -> None:
    assert isinstance(clock_from_env({}), SystemClock)
    assert isinstance(clock_from_env({FAKE_CLOCK_ENV: "  "}), SystemClock)
    fake = clock_from_env({FAKE_CLOCK_ENV: SETTING})
    assert fake.is_fake
    assert fake.describe().startswith("FAKE CLOCK: showing 2026-10-25T00:50:00+00:00")


def test_now_is_aware_utc_even_for_a_start_given_with_an_offset() -> None:
    fake = parse_fake_clock("2026-10-25T02:50:00+02:00,anchor=0,speed=1", read_at=0.0)
    now = fake.now()
    assert now.tzinfo is UTC
    assert now >= datetime(2026, 10, 25, 0, 50, tzinfo=UTC)


def test_a_held_clock_stands_at_its_start_until_its_file_names_the_anchor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    begins = tmp_path / "begins"
    held = parse_fake_clock(f"2026-11-30T01:57:00Z,begins={begins},speed=60", read_at=0.0)
    assert parse_fake_clock(held.setting(), read_at=5.0) == held
    monkeypatch.setattr(clock_module.time, "time", lambda: 1764465000.0)
    start = datetime(2026, 11, 30, 1, 57, tzinfo=UTC)
    assert held.now() == start
    monkeypatch.setattr(clock_module.time, "time", lambda: 1764465100.0)
    assert held.now() == start  # a hundred real seconds later: still standing
    assert held.running_since() is None
    begins.write_text("1764465100.0")
    monkeypatch.setattr(clock_module.time, "time", lambda: 1764465102.0)
    assert held.now() == datetime(2026, 11, 30, 1, 59, tzinfo=UTC)  # 2 s x 60 = 2 min
    begins.write_text("1764465000.0")  # the anchor, once read, never changes
    assert held.now() == datetime(2026, 11, 30, 1, 59, tzinfo=UTC)


def test_a_held_clocks_file_that_holds_no_unix_time_is_named(tmp_path: Path) -> None:
    begins = tmp_path / "begins"
    begins.write_text("soon")
    held = parse_fake_clock(f"2026-11-30T01:57:00Z,begins={begins}", read_at=0.0)
    with pytest.raises(ClockConfigError) as caught:
        held.now()
    assert str(caught.value) == f"begins: {str(begins)!r} holds 'soon', expected a Unix time"


def test_a_held_clocks_file_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    (tmp_path / "begins").mkdir()  # a directory where the file should be
    held = parse_fake_clock(f"2026-11-30T01:57:00Z,begins={tmp_path / 'begins'}", read_at=0.0)
    with pytest.raises(ClockConfigError, match="cannot be read \\(IsADirectoryError\\)"):
        held.now()
    (tmp_path / "binary").write_bytes(b"\xff\xfe")
    held = parse_fake_clock(f"2026-11-30T01:57:00Z,begins={tmp_path / 'binary'}", read_at=0.0)
    with pytest.raises(ClockConfigError, match="cannot be read \\(UnicodeDecodeError\\)"):
        held.now()
