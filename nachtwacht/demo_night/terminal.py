"""What the demo writes while it runs: timed steps, and the live table (redrawn in place on a
terminal; in a log, one line for every platform minute that ends, so the log never falls silent
for more than a platform minute)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import TextIO

from nachtwacht.demo_night.night import Night
from nachtwacht.demo_night.progress import LEGEND, Snapshot, render_line, render_table

__all__ = ["LiveTable", "Output"]


@dataclass
class Output:
    stream: TextIO
    started: float

    def step(self, text: str) -> None:
        self.stream.write(f"[{time.monotonic() - self.started:5.1f}s] {text}\n")
        self.stream.flush()

    def line(self, text: str = "") -> None:
        self.stream.write(text + "\n")
        self.stream.flush()


class LiveTable:
    """Redraws the table in place on a terminal; one line per ended platform minute otherwise."""

    def __init__(self, out: Output, night: Night, caps: tuple[int, int]) -> None:
        self._out = out
        self._night = night
        self._caps = caps
        self._tty = out.stream.isatty()
        self._drawn = 0
        self._settled_said = False

    @property
    def redraws(self) -> bool:
        return self._tty

    def legend(self) -> None:
        if not self._tty:
            for line in LEGEND:
                self._out.line(line)

    def show(self, snapshot: Snapshot) -> None:
        """On a terminal: the table as it stands now."""
        if not self._tty:
            return
        lines = render_table(snapshot, self._night, self._caps)
        if self._drawn:
            self._out.stream.write(f"\x1b[{self._drawn}F\x1b[J")
        self._out.stream.write("\n".join(lines) + "\n")
        self._out.stream.flush()
        self._drawn = len(lines)

    def minute_ended(self, snapshot: Snapshot, *, window_closes: datetime) -> None:
        """In a log: the line of the minute that ended at `snapshot.at` (taken as of then), and
        once every agent has its outcome, why the night still goes on."""
        if self._tty or snapshot.at <= self._night.start:
            return
        self._out.line(render_line(snapshot, self._night))
        if snapshot.settled and not self._settled_said:
            self._settled_said = True
            night = self._night
            self._out.line(
                f"  every agent has its outcome; the night goes on to {night.label(night.end)}: "
                f"the 03:00 window closes at {night.label(window_closes)}, then the control "
                "plane's reconcile worker records the misses and writes one notification per "
                "organisation (shown after the night)"
            )
