"""A warning for a condition that lasts: said the first time, then at most once every so often.

A feed that cannot be read, or a fenced server refused at every new connection, holds for a whole
outage and is met once per read or per request: a line each time buries the lines that say what to
do. So the first occurrence is said at once, a repeat of the same condition at most every
`every_seconds` (with how long it has held and how many times it was met in between), and a
different condition at once again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Repeat", "RepeatedWarning", "UnwrittenBatch"]


@dataclass(frozen=True, kw_only=True)
class Repeat:
    """What to say now: the first line of the condition, or a repeat after `held_seconds`, met
    `unsaid` more times since the line before."""

    first: bool
    held_seconds: float
    unsaid: int


class RepeatedWarning:
    """Whether to say a condition now (`holds`), and how long it held once it ends (`ended`).
    Safe to call from several threads. `monotonic` is read at each call (`time.monotonic` when
    not given)."""

    def __init__(
        self, every_seconds: float, *, monotonic: Callable[[], float] | None = None
    ) -> None:
        self._every = every_seconds
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._condition: str | None = None
        self._since = 0.0
        self._said_at = 0.0
        self._unsaid = 0

    def holds(self, condition: str = "") -> Repeat | None:
        """Note that `condition` holds now: what to say, or None to stay quiet."""
        now = self._now()
        with self._lock:
            if condition != self._condition:
                self._condition, self._since, self._said_at, self._unsaid = condition, now, now, 0
                return Repeat(first=True, held_seconds=0.0, unsaid=0)
            if now - self._said_at < self._every:
                self._unsaid += 1
                return None
            repeat = Repeat(first=False, held_seconds=now - self._since, unsaid=self._unsaid)
            self._said_at, self._unsaid = now, 0
            return repeat

    @property
    def unsaid(self) -> int:
        """How many times the condition was met since the last line that said it."""
        with self._lock:
            return self._unsaid

    def ended(self) -> float | None:
        """The condition no longer holds: how long it held, or None when none did."""
        now = self._now()
        with self._lock:
            if self._condition is None:
                return None
            self._condition = None
            return now - self._since

    def _now(self) -> float:
        return self._monotonic() if self._monotonic is not None else time.monotonic()


class UnwrittenBatch:
    """A batch a background thread writes again and again (kept in memory until it is written):
    a failure is said at once, then at most every `every_seconds` while the writes keep failing
    (with how long), and once when one is written again. `what` names the batch in the lines,
    `kept` says until when it is kept ("the next read")."""

    def __init__(
        self,
        log: logging.Logger,
        what: str,
        kept: str,
        every_seconds: float,
        *,
        monotonic: Callable[[], float] | None = None,
    ) -> None:
        self._log = log
        self._what = what
        self._kept = kept
        self._warning = RepeatedWarning(every_seconds, monotonic=monotonic)

    def failed(self, exc: Exception) -> None:
        repeat = self._warning.holds()
        if repeat is None:
            return
        after = "" if repeat.first else f" after {repeat.held_seconds:.0f} s"
        self._log.warning(
            "%s not written yet%s (kept for %s): %s", self._what, after, self._kept, exc
        )

    def written(self) -> None:
        failed_for = self._warning.ended()
        if failed_for is not None:
            self._log.warning("%s written again after %.0f s", self._what, failed_for)
