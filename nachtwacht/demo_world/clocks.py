"""Fast and shifted fake clocks for worlds, made of `ground.clock.FakeClock`; none re-implements
the product's time.

NightClock    one fast fake clock shared by many processes through `NACHTWACHT_FAKE_CLOCK`;
              either its anchor lies in the real future (setting up a world happens while the
              clock still shows the evening), or it is held at its start until `begin()`
showing_now   a real-speed clock showing a given instant now (signing a release "before the
              night", installing the first version)
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from ground.clock import FakeClock

__all__ = ["NightClock", "showing_now"]


def showing_now(instant: datetime) -> FakeClock:
    """A real-speed fake clock that shows `instant` at this moment."""
    return FakeClock(start=instant, anchor=time.time(), speed=1.0)


@dataclass(frozen=True)
class NightClock:
    """`start` at real Unix time `anchor`, `speed` times as fast, for every process of a world.

    A held clock (`held`) has no anchor yet: it stands at `start` in every process until
    `begin()` writes the anchor to its `begins` file, so a world is set up on a clock that does
    not move and the night starts the moment the test is ready — no lead of real seconds."""

    start: datetime
    anchor: float | None = None
    speed: float = 30.0
    begins: Path | None = None

    @classmethod
    def starting(
        cls, start: datetime, *, speed: float = 30.0, lead_seconds: float = 25.0
    ) -> NightClock:
        """A clock that shows `start` `lead_seconds` real seconds from now (by default enough
        for a test to start a control plane and a few hosts before the night begins)."""
        return cls(start=start, anchor=time.time() + lead_seconds, speed=speed)

    @classmethod
    def held(cls, start: datetime, *, begins: Path, speed: float = 30.0) -> NightClock:
        """A clock that shows `start` until `begin()`; `begins` must not exist yet."""
        if begins.exists():
            raise ValueError(f"begins: {begins} exists already (a held clock starts unbegun)")
        return cls(start=start, speed=speed, begins=begins.absolute())

    def shifted(self, by: timedelta) -> NightClock:
        """The same clock, wrong by `by` (another host's bad time), begun together with it."""
        return NightClock(
            start=self.start + by, anchor=self.anchor, speed=self.speed, begins=self.begins
        )

    def begin(self) -> None:
        """Let a held clock run on from `start`, now (once; later calls change nothing). Never
        with a lead: a clock that stood at `start` must not step back before it."""
        if self.begins is None or self.begins.exists():
            return
        partial = self.begins.with_name(self.begins.name + ".partial")
        partial.write_text(repr(time.time()), encoding="ascii")
        os.replace(partial, self.begins)

    def fake(self) -> FakeClock:
        return FakeClock(
            start=self.start,
            anchor=self.anchor,
            speed=self.speed,
            begins=None if self.begins is None else str(self.begins),
        )

    @property
    def setting(self) -> str:
        """The `NACHTWACHT_FAKE_CLOCK` value that gives a child process this clock."""
        return self.fake().setting()

    def now(self) -> datetime:
        return self.fake().now()

    def wait_until(self, instant: datetime) -> None:
        """Sleep (real time) until the clock shows `instant` (beginning a held clock first)."""
        self.begin()
        remaining = (instant - self.now()).total_seconds() / self.speed
        if remaining > 0:
            time.sleep(remaining)
