"""This replica's clock against the database server's.

Each replica judges by its own clock whether a slot's window is open, which minute a grant counts
in against the caps, when a token expires and when it was alive. A replica whose time
synchronisation stopped drifts away from the others without an error anywhere: the caps are
counted in two minutes at once, a window closes early on one replica and late on another, tokens
expire early or late, and its liveness marks stop covering the time they claim to.

So at each liveness mark (every tick of the reconcile loop, leader or not) the replica reads the
database server's clock (`clock_timestamp()`) and compares it with its own, halfway between
sending the question and reading the answer. The offset is this process's gauge in `/metrics`;
beyond `CLOCK_OFF_SECONDS` (more than the query's own round trip can explain) the log says so at
once, then at most every `REPEAT_SECONDS` while it lasts, and once when it is back. The replica
cannot tell which of the two clocks is wrong: every replica off by the same amount points at the
database server's.

A fake clock (the demo's, the tests') is never compared: it is meant to disagree.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from control_plane.repeated_warning import RepeatedWarning
from control_plane.types import Connection
from ground.clock import Clock

__all__ = ["CLOCK_OFF_SECONDS", "ClockReading", "ClockWatch"]

# NTP keeps hosts within milliseconds of each other, and a database's round trip is well under a
# second; two seconds already move a minute's cap by a thirtieth and are worth a look long
# before a 15-minute window notices.
CLOCK_OFF_SECONDS = 2.0
REPEAT_SECONDS = 600.0

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class ClockReading:
    """This clock minus the database server's (`offset`), give or take `margin` (half the round
    trip of the question), both in seconds."""

    offset: float
    margin: float

    @property
    def off(self) -> bool:
        """Whether the clocks disagree by more than `CLOCK_OFF_SECONDS` beyond the margin."""
        return abs(self.offset) - self.margin > CLOCK_OFF_SECONDS


class ClockWatch:
    """The last reading of this process's clock against the database server's (None before the
    first one, and always under a fake clock). Safe to read from any thread."""

    def __init__(self) -> None:
        self.last: ClockReading | None = None
        self._warning = RepeatedWarning(REPEAT_SECONDS)

    @property
    def offset_seconds(self) -> float:
        """The last offset, NaN when none was read (`/metrics` shows it so)."""
        return math.nan if self.last is None else self.last.offset

    def measure(self, conn: Connection, clock: Clock) -> ClockReading | None:
        """Read the database server's clock on `conn` and compare; None under a fake clock."""
        if clock.is_fake:
            return None
        asked = clock.now().timestamp()
        row = conn.execute(
            "SELECT extract(epoch FROM clock_timestamp())::float8 AS at", prepare=False
        ).fetchone()
        answered = clock.now().timestamp()
        assert row is not None
        reading = ClockReading(
            offset=(asked + answered) / 2 - float(row["at"]), margin=(answered - asked) / 2
        )
        self.observe(reading)
        return reading

    def observe(self, reading: ClockReading) -> None:
        """Keep the reading, and say what a change of agreement means."""
        self.last = reading
        if not reading.off:
            held = self._warning.ended()
            if held is not None:
                logger.warning(
                    "this replica's clock agrees with the database server's again (offset "
                    "%+.3f s) after %.0f s",
                    reading.offset,
                    held,
                )
            return
        direction = "ahead of" if reading.offset > 0 else "behind"
        repeat = self._warning.holds(direction)
        if repeat is None:
            return
        logger.warning(
            "this replica's clock is %.1f s %s the database server's%s: windows, the caps' "
            "minutes, tokens' expiry and liveness marks are judged by it, so replicas disagree; "
            "check time synchronisation (chrony, systemd-timesyncd) here and on the database "
            "host",
            abs(reading.offset),
            direction,
            "" if repeat.first else f" (for {repeat.held_seconds:.0f} s)",
        )
