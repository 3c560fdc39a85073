"""A fast fake clock held at its start (`begins=FILE`: the demo night and the end-to-end tests
stand still while their processes start) is no jump of the host's clock: the time elapsed on the
clock no one sets counts only while the fake clock runs. Real time, a real file, a real
`FakeClock`; the speed is high so that a hold of a fraction of a second is more than a day of
product time (at the demo's 600x, two and a half real minutes are)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from agent_daemon.connection.server_clock import MAX_SERVER_CLOCK_OFFSET, ServerClock
from ground.clock import FakeClock

START = datetime(2026, 11, 30, 1, 55, tzinfo=UTC)
SPEED = 400_000.0


def test_a_fast_clock_held_at_its_start_reads_as_no_jump(tmp_path: Path) -> None:
    begins = tmp_path / "night-begins"
    fake = FakeClock(start=START, begins=str(begins), speed=SPEED)
    clock = ServerClock(fake)
    # An answer while the clock stands still (a daemon's first minute before the night begins).
    clock.learn(START, local_time=fake.now())
    held = 0.5
    assert held * SPEED > MAX_SERVER_CLOCK_OFFSET.total_seconds()
    time.sleep(held)
    assert fake.now() == START
    assert clock.disagreement is None
    begins.write_text(f"{time.time()!r}\n", encoding="ascii")
    time.sleep(0.05)
    assert fake.now() > START
    assert clock.disagreement is None


def test_a_fast_clock_that_runs_counts_its_time_at_its_speed() -> None:
    """Held time is excluded, not running time: a fake clock running at its speed between two
    minutes (no answer in between) moves with the count on the boot clock, however fast."""
    fake = FakeClock(start=START, anchor=time.time(), speed=SPEED)
    clock = ServerClock(fake)
    clock.learn(fake.now(), local_time=fake.now())
    before = fake.now()
    time.sleep(0.5)
    assert (fake.now() - before).total_seconds() > MAX_SERVER_CLOCK_OFFSET.total_seconds()
    assert clock.disagreement is None
