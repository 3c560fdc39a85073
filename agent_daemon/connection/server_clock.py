"""The control plane's clock as this host sees it: the agent plans on the server's time.

Every successful answer of the control plane carries `SERVER_TIME_HEADER`; the client teaches this
clock the offset between that reading and the host's own clock (never from an error answer), and
everything that plans or ticks asks this clock, so a host whose clock is hours off still updates at
03:00 server time.

The control plane is not trusted with more than the schedule, though (docs/agent_updater.md
"Time"):

* the offset is bounded by `MAX_SERVER_CLOCK_OFFSET`; a disagreement that reaches it is kept at the
  bound and reported (`disagreement`), for the daemon to say loudly. An offset at the bound is
  one that was cut to it (`beyond_bound`): the cache keeps the bounded offset, so a daemon
  restarted on it, and `agent status` reading it, both count the clock as off until an answer
  measures it again;
* between answers (the control plane out of reach) the host's clock is held to the time elapsed
  since the last answer, on the kernel's boot clock, which no `date -s` or clock step moves and
  which counts a suspended host's sleep: a host clock that jumped further than the bound since
  then is `disagreement` too, until the next answer measures it again (a fake clock counts only
  while it runs, `product_elapsed`: one held at its start is no jump);
* the updater judges `expires` on `expiry_clock()`, which never reads earlier than the host's own
  clock: like TUF's freeze defence, the time that decides whether a signed manifest is still
  fresh is one the repository cannot move back. A server can only make it later (stricter).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from ground.clock import Clock, FakeClock
from ground.limits import MAX_HOST_CLOCK_OFFSET_SECONDS

__all__ = [
    "MAX_SERVER_CLOCK_OFFSET",
    "ExpiryClock",
    "ServerClock",
    "beyond_bound",
    "product_elapsed",
]

# A larger gap means a broken clock or a broken answer, and is not followed further (why the bound
# is where it is: `ground.limits`; the control plane records a miss beyond it as `host_clock`).
MAX_SERVER_CLOCK_OFFSET = timedelta(seconds=MAX_HOST_CLOCK_OFFSET_SECONDS)


def beyond_bound(offset: timedelta) -> bool:
    """Whether host and control plane disagree further than the agent follows: the one rule for
    the daemon's planning (`ServerClock.disagreement`) and `agent status`. An offset at the bound
    counts, as it is what a larger one is kept at (and cached as)."""
    return abs(offset) >= MAX_SERVER_CLOCK_OFFSET


class ServerClock:
    """The program's clock plus a learned offset; it satisfies `ground.clock.Clock`, so the
    updater's expiry checks follow server time too."""

    def __init__(
        self,
        base: Clock,
        *,
        offset: timedelta = timedelta(0),
        elapsed: Callable[[], float] | None = None,
    ) -> None:
        self._base = base
        self._offset = _bounded(offset)
        self._measured = offset
        # Product seconds on a clock no one sets (default: the kernel's boot clock at the base
        # clock's speed, `product_elapsed`), and the control plane's time and that reading at the
        # last answer.
        self._elapsed = elapsed or product_elapsed(base)
        self._answered: tuple[datetime, float] | None = None
        # The minute's job and the main thread (status, signals) may both ask.
        self._lock = threading.Lock()

    @property
    def is_fake(self) -> bool:
        return self._base.is_fake

    @property
    def speed(self) -> float:
        return self._base.speed

    @property
    def offset(self) -> timedelta:
        with self._lock:
            return self._offset

    def learn(self, server_time: datetime, *, local_time: datetime) -> None:
        self.learn_offset(server_time - local_time)
        with self._lock:
            self._answered = (server_time, self._elapsed())

    def learn_offset(self, offset: timedelta) -> None:
        with self._lock:
            self._offset = _bounded(offset)
            self._measured = offset

    def learn_offset_seconds(self, seconds: float) -> None:
        """An offset kept on disk (the config cache): a value that is not a finite number is
        ignored, any other is bounded like one just measured."""
        if math.isfinite(seconds):
            limit = MAX_SERVER_CLOCK_OFFSET.total_seconds()
            self.learn_offset(timedelta(seconds=max(-limit, min(limit, seconds))))

    @property
    def disagreement(self) -> timedelta | None:
        """The offset last measured (or kept on disk), when it lies at or beyond
        `MAX_SERVER_CLOCK_OFFSET` (`beyond_bound`: it was cut to the bound), or how far the host's
        clock moved against the time elapsed since the last answer, beyond the bound; None while
        host and server agree within it."""
        with self._lock:
            measured = self._measured
            answered = self._answered
        if beyond_bound(measured):
            return measured
        if answered is None:
            return None
        server_time, at = answered
        moved = self.now() - (server_time + timedelta(seconds=self._elapsed() - at))
        return -moved if beyond_bound(moved) else None

    def expiry_clock(self) -> ExpiryClock:
        """The clock a signed manifest's freshness is judged on: never behind the host's."""
        return ExpiryClock(self)

    def now(self) -> datetime:
        return self._base.now() + self.offset

    def host_now(self) -> datetime:
        return self._base.now()

    def real_seconds(self, product_seconds: float) -> float:
        return self._base.real_seconds(product_seconds)

    def sleep(self, product_seconds: float) -> None:
        self._base.sleep(product_seconds)

    def describe(self) -> str:
        return f"{self._base.describe()}, server offset {self.offset.total_seconds():+.0f}s"


def product_elapsed(base: Clock) -> Callable[[], float]:
    """The product seconds that pass on the kernel's boot clock, at `base`'s speed: what the host's
    clock is held to between answers. A fake clock standing at its start (`begins`) passes none:
    held for minutes at a demo's speed, it would otherwise read as a jump of days."""
    if isinstance(base, FakeClock):
        return _FakeClockElapsed(base)
    return lambda: time.clock_gettime(time.CLOCK_BOOTTIME) * base.speed


class _FakeClockElapsed:
    """A fake clock's running time on the boot clock: nothing while it stands still, then its
    speed times the boot clock's seconds since the instant it shows its start."""

    def __init__(self, clock: FakeClock) -> None:
        self._clock = clock
        # The boot clock's reading at the instant the fake clock shows `start` (once it runs).
        self._boot_at_start: float | None = None
        self._lock = threading.Lock()

    def __call__(self) -> float:
        boot = time.clock_gettime(time.CLOCK_BOOTTIME)
        with self._lock:
            if self._boot_at_start is None:
                anchor = self._clock.running_since()
                if anchor is None:
                    return 0.0
                self._boot_at_start = boot - (time.time() - anchor)
            return (boot - self._boot_at_start) * self._clock.speed


def _bounded(offset: timedelta) -> timedelta:
    return max(-MAX_SERVER_CLOCK_OFFSET, min(MAX_SERVER_CLOCK_OFFSET, offset))


class ExpiryClock:
    """`max(host clock, server clock)`: the control plane can move it later (within the bound),
    never earlier than the host's own clock. Waits and conversions are the server clock's."""

    def __init__(self, server: ServerClock) -> None:
        self._server = server

    @property
    def is_fake(self) -> bool:
        return self._server.is_fake

    @property
    def speed(self) -> float:
        return self._server.speed

    def now(self) -> datetime:
        return max(self._server.host_now(), self._server.now())

    def real_seconds(self, product_seconds: float) -> float:
        return self._server.real_seconds(product_seconds)

    def sleep(self, product_seconds: float) -> None:
        self._server.sleep(product_seconds)

    def describe(self) -> str:
        return f"the later of the host's and the server's clock ({self._server.describe()})"
