"""The one clock object per program: only the shells read it, and pass the instant down.

Only the shells read time, and they read it here. A program builds its clock once at start-up with
`clock_from_env()` and passes it down. `NACHTWACHT_FAKE_CLOCK` makes every program started with the
same value agree on one fast-running product time, which is how tests and the demo play a whole
night in a minute:

    NACHTWACHT_FAKE_CLOCK="2026-10-25T00:50:00Z,anchor=1764465000.0,speed=60"

The clock shows 2026-10-25T00:50:00Z at real Unix time 1764465000.0 and runs 60 times as fast.
Without `anchor` the anchor is the moment the value is read; without `speed` it is 1.

`begins=FILE` instead of `anchor` holds the clock at `start` until FILE exists; FILE holds the
anchor (a Unix time), written once by whoever starts the night. A test sets its world up on a
clock that stands still, then lets it run: no fixed lead of real seconds to guess and wait out.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from ground.instants import InstantError, parse_instant
from ground.limits import FIRST_YEAR, LAST_YEAR

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
    """Shows `start` at real Unix time `anchor` and runs `speed` times as fast as real time.

    With `begins` (a file) instead of an anchor it stands at `start` until the file exists and
    then runs from the anchor written in it."""

    start: datetime
    anchor: float | None = None
    speed: float = 1.0
    begins: str | None = None
    is_fake: bool = True
    # The anchor once read from `begins` (it never changes after that).
    _found: list[float] = field(default_factory=list, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.start.tzinfo is None:
            raise ClockConfigError(f"start: {self.start.isoformat()!r} has no time zone (use ...Z)")
        if not FIRST_YEAR < self.start.astimezone(UTC).year < LAST_YEAR:
            # A year inside the planner's on each side: a local date there is still one it plans.
            raise ClockConfigError(
                f"start: {self.start.isoformat()!r} is out of range (expected an instant in the "
                f"years {FIRST_YEAR + 1} to {LAST_YEAR - 1})"
            )
        if (self.anchor is None) == (self.begins is None):
            raise ClockConfigError(
                f"anchor: {self.anchor!r}, begins: {self.begins!r} — expected exactly one of them"
            )
        if self.anchor is not None and not math.isfinite(self.anchor):
            raise ClockConfigError(f"anchor: {self.anchor!r} must be a finite Unix time")
        if self.begins is not None and not (os.path.isabs(self.begins) and "," not in self.begins):
            raise ClockConfigError(
                f"begins: {self.begins!r} must be an absolute file path without a comma"
            )
        if not (self.speed > 0 and math.isfinite(self.speed)):
            raise ClockConfigError(f"speed: {self.speed!r} must be a positive, finite number")

    def running_since(self) -> float | None:
        """The real Unix time at which the clock shows `start`; None while it stands still."""
        if self.anchor is not None:
            return self.anchor
        if not self._found:
            assert self.begins is not None
            try:
                with open(self.begins, encoding="ascii") as file:
                    text = file.read().strip()
            except FileNotFoundError:
                return None
            except (OSError, UnicodeDecodeError) as exc:
                raise ClockConfigError(
                    f"begins: {self.begins!r} cannot be read ({exc.__class__.__name__}), "
                    "expected a file holding a Unix time"
                ) from exc
            try:
                anchor = float(text)
            except ValueError:
                anchor = math.nan
            if not math.isfinite(anchor):
                raise ClockConfigError(
                    f"begins: {self.begins!r} holds {text[:40]!r}, expected a Unix time"
                )
            self._found.append(anchor)
        return self._found[0]

    def now(self) -> datetime:
        anchor = self.running_since()
        if anchor is None:
            return self.start.astimezone(UTC)
        elapsed = (time.time() - anchor) * self.speed
        return (self.start + timedelta(seconds=elapsed)).astimezone(UTC)

    def real_seconds(self, product_seconds: float) -> float:
        return product_seconds / self.speed

    def sleep(self, product_seconds: float) -> None:
        if product_seconds > 0:
            time.sleep(product_seconds / self.speed)

    def describe(self) -> str:
        since = (
            f"at Unix time {self.anchor:.3f}"
            if self.anchor is not None
            else f"once {self.begins} names its start"
        )
        return (
            f"FAKE CLOCK: showing {self.start.isoformat()} {since}, "
            f"running {self.speed:g}x real time (from {FAKE_CLOCK_ENV})"
        )

    def setting(self) -> str:
        """The environment value that reproduces this clock in another process."""
        # Full precision: a child process given a rounded start would run behind its parent.
        start = self.start.astimezone(UTC).isoformat().replace("+00:00", "Z")
        when = f"anchor={self.anchor!r}" if self.anchor is not None else f"begins={self.begins}"
        return f"{start},{when},speed={self.speed!r}"


def parse_fake_clock(value: str, *, read_at: float) -> FakeClock:
    """Parse a `NACHTWACHT_FAKE_CLOCK` value; `read_at` is the anchor when the value names none."""
    parts = [part.strip() for part in value.split(",")]
    try:
        start = parse_instant(parts[0], field=FAKE_CLOCK_ENV)
    except InstantError as exc:
        problem = "has no time zone" if exc.without_offset else "is not an ISO 8601 instant"
        raise ClockConfigError(
            f"{FAKE_CLOCK_ENV}: {parts[0]!r} {problem} (expected e.g. 2026-10-25T00:50:00Z)"
        ) from exc
    options: dict[str, float] = {"anchor": read_at, "speed": 1.0}
    begins: str | None = None
    given: set[str] = set()
    for part in parts[1:]:
        name, sep, raw = part.partition("=")
        name = name.strip()
        if not sep or name not in (*options, "begins"):
            raise ClockConfigError(
                f"{FAKE_CLOCK_ENV}: {part!r} is not understood "
                "(expected anchor=UNIX_TIME, begins=FILE or speed=N)"
            )
        if name in given:
            raise ClockConfigError(f"{FAKE_CLOCK_ENV}: {name} is given twice (expected it once)")
        given.add(name)
        if name == "begins":
            begins = raw.strip()
            continue
        try:
            options[name] = float(raw)
        except ValueError as exc:
            raise ClockConfigError(f"{FAKE_CLOCK_ENV}: {name}={raw!r} is not a number") from exc
    if {"anchor", "begins"} <= given:
        raise ClockConfigError(
            f"{FAKE_CLOCK_ENV}: anchor and begins are both given (expected one of them)"
        )
    try:
        return FakeClock(
            start=start,
            anchor=None if begins is not None else options["anchor"],
            begins=begins,
            speed=options["speed"],
        )
    except ClockConfigError as exc:
        raise ClockConfigError(f"{FAKE_CLOCK_ENV}: {exc}") from exc


def clock_from_env(environ: Mapping[str, str] | None = None) -> Clock:
    """The program's clock: a fake one when `NACHTWACHT_FAKE_CLOCK` is set, else the host's."""
    env = os.environ if environ is None else environ
    value = env.get(FAKE_CLOCK_ENV, "").strip()
    if not value:
        return SystemClock()
    return parse_fake_clock(value, read_at=time.time())
