"""Clocks a test moves by hand. Both satisfy `ground.clock.Clock`; the fast clock of a night
shared by many processes is the demo's (`nachtwacht.demo_world.clocks.NightClock`).

ManualClock   a test moves it by hand (`set`, `advance`); `sleep` advances it
SkewedClock   another host's wrong view of a ManualClock's moment
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ["ManualClock", "SkewedClock"]


class ManualClock:
    """A clock the test moves by hand."""

    is_fake = True
    speed = 1.0

    def __init__(self, start: datetime) -> None:
        self._now = start.astimezone(UTC)

    def now(self) -> datetime:
        return self._now

    def set(self, instant: datetime) -> None:
        self._now = instant.astimezone(UTC)

    def advance(self, **delta: float) -> datetime:
        self._now += timedelta(**delta)
        return self._now

    def real_seconds(self, product_seconds: float) -> float:
        return product_seconds

    def sleep(self, product_seconds: float) -> None:
        self._now += timedelta(seconds=product_seconds)

    def describe(self) -> str:
        return f"manual test clock at {self._now.isoformat()}"


class SkewedClock:
    """Another host's view of the same moment: `base` plus a fixed error."""

    is_fake = True
    speed = 1.0

    def __init__(self, base: ManualClock, skew: timedelta) -> None:
        self._base = base
        self._skew = skew

    def now(self) -> datetime:
        return self._base.now() + self._skew

    def real_seconds(self, product_seconds: float) -> float:
        return product_seconds

    def sleep(self, product_seconds: float) -> None:
        self._base.sleep(product_seconds)

    def describe(self) -> str:
        return f"skewed test clock ({self._skew})"
