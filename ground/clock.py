"""The one clock object per program (DESIGN.md "Time").

Only the shells read time, and they read it here. A program builds its clock once at start-up with
`clock_from_env()` and passes it down. `NACHTWACHT_FAKE_CLOCK` makes every program started with the
same value agree on one fast-running product time, which is how tests and the demo play a whole
night in a minute:

    NACHTWACHT_FAKE_CLOCK="2026-10-25T00:50:00Z,anchor=1764465000.0,speed=60"

The clock shows 2026-10-25T00:50:00Z at real Unix time 1764465000.0 and runs 60 times as fast.
Without `anchor` the anchor is the moment the value is read; without `speed` it is 1.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = [
    "FAKE_CLOCK_ENV",
    "Clock",
    "ClockConfigError",
    "FakeClock",
    "SystemClock",
    "clock_from_env",
    "parse_fake_clock",
]

FAKE_CLOCK_ENV = "NACHTWACHT_FAKE_CLOCK"


class ClockConfigError(ValueError):
    """The fake-clock setting cannot be understood."""


class Clock(Protocol):
    """Product time. `sleep` and `real_seconds` take product seconds: waits follow a fast clock."""

    @property
    def is_fake(self) -> bool: ...

    @property
    def speed(self) -> float: ...

    def now(self) -> datetime: ...

    def real_seconds(self, product_seconds: float) -> float: ...

    def sleep(self, product_seconds: float) -> None: ...

    def describe(self) -> str: ...


class SystemClock:
    """The host's own clock."""

    is_fake = False
    speed = 1.0

    def now(self) -> datetime:
        return datetime.now(UTC)

    def real_seconds(self, product_seconds: float) -> float:
        return product_seconds

    def sleep(self, product_seconds: float) -> None:
        if product_seconds > 0:
            time.sleep(product_seconds)

    def describe(self) -> str:
        return "system clock"


@dataclass(frozen=True, kw_only=True)
class FakeClock:
    """Shows `start` at real Unix time `anchor` and runs `speed` times as fast as real time."""

    start: datetime
    anchor: float
    speed: float = 1.0
    is_fake: bool = True

    def __post_init__(self) -> None:
        if self.start.tzinfo is None:
            raise ClockConfigError(f"start: {self.start.isoformat()!r} has no time zone (use ...Z)")
        if not math.isfinite(self.anchor):
            raise ClockConfigError(f"anchor: {self.anchor!r} must be a finite Unix time")
        if not (self.speed > 0 and math.isfinite(self.speed)):
            raise ClockConfigError(f"speed: {self.speed!r} must be a positive, finite number")

    def now(self) -> datetime:
        elapsed = (time.time() - self.anchor) * self.speed
        return (self.start + timedelta(seconds=elapsed)).astimezone(UTC)

    def real_seconds(self, product_seconds: float) -> float:
        return product_seconds / self.speed

    def sleep(self, product_seconds: float) -> None:
        if product_seconds > 0:
            time.sleep(product_seconds / self.speed)

    def describe(self) -> str:
        return (
            f"FAKE CLOCK: showing {self.start.isoformat()} at Unix time {self.anchor:.3f}, "
            f"running {self.speed:g}x real time (from {FAKE_CLOCK_ENV})"
        )

    def setting(self) -> str:
        """The environment value that reproduces this clock in another process."""
        # Full precision: a child process given a rounded start would run behind its parent.
        start = self.start.astimezone(UTC).isoformat().replace("+00:00", "Z")
        return f"{start},anchor={self.anchor!r},speed={self.speed!r}"


def parse_fake_clock(value: str, *, read_at: float) -> FakeClock:
    """Parse a `NACHTWACHT_FAKE_CLOCK` value; `read_at` is the anchor when the value names none."""
    parts = [part.strip() for part in value.split(",")]
    try:
        start = datetime.fromisoformat(parts[0].replace("Z", "+00:00"))
    except ValueError as exc:
        raise ClockConfigError(
            f"{FAKE_CLOCK_ENV}: {parts[0]!r} is not an ISO 8601 instant "
            "(expected e.g. 2026-10-25T00:50:00Z)"
        ) from exc
    if start.tzinfo is None:
        raise ClockConfigError(
            f"{FAKE_CLOCK_ENV}: {parts[0]!r} has no time zone (expected e.g. 2026-10-25T00:50:00Z)"
        )
    options: dict[str, float] = {"anchor": read_at, "speed": 1.0}
    given: set[str] = set()
    for part in parts[1:]:
        name, sep, raw = part.partition("=")
        name = name.strip()
        if not sep or name not in options:
            raise ClockConfigError(
                f"{FAKE_CLOCK_ENV}: {part!r} is not understood "
                "(expected anchor=UNIX_TIME or speed=N)"
            )
        if name in given:
            raise ClockConfigError(f"{FAKE_CLOCK_ENV}: {name} is given twice (expected it once)")
        given.add(name)
        try:
            options[name] = float(raw)
        except ValueError as exc:
            raise ClockConfigError(f"{FAKE_CLOCK_ENV}: {name}={raw!r} is not a number") from exc
    try:
        return FakeClock(start=start, anchor=options["anchor"], speed=options["speed"])
    except ClockConfigError as exc:
        raise ClockConfigError(f"{FAKE_CLOCK_ENV}: {exc}") from exc


def clock_from_env(environ: Mapping[str, str] | None = None) -> Clock:
    """The program's clock: a fake one when `NACHTWACHT_FAKE_CLOCK` is set, else the host's."""
    env = os.environ if environ is None else environ
    value = env.get(FAKE_CLOCK_ENV, "").strip()
    if not value:
        return SystemClock()
    return parse_fake_clock(value, read_at=time.time())
