"""The control plane's clock as this host sees it (DESIGN.md "The agent side": plan on server time).

Every answer of the control plane carries `SERVER_TIME_HEADER`; the client teaches this clock the
offset between that reading and the host's own clock, and everything that plans, ticks or checks an
expiry asks this clock, so a host whose clock is hours off still updates at 03:00 server time.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from ground.clock import Clock

__all__ = ["ServerClock"]


class ServerClock:
    """The program's clock plus a learned offset; it satisfies `ground.clock.Clock`, so the
    updater's expiry checks follow server time too."""

    def __init__(self, base: Clock, *, offset: timedelta = timedelta(0)) -> None:
        self._base = base
        self._offset = offset
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

    def learn_offset(self, offset: timedelta) -> None:
        with self._lock:
            self._offset = offset

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
