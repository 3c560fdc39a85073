"""What the demo writes while it runs: timed steps, and the live table (redrawn in place on a
terminal, one line per change in a log)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TextIO

from nachtwacht.demo_night.night import Night
from nachtwacht.demo_night.progress import Snapshot, render_line, render_table

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
    """Redraws the table in place on a terminal; one line per platform minute otherwise."""

    def __init__(self, out: Output, night: Night, caps: tuple[int, int]) -> None:
        self._out = out
        self._night = night
        self._caps = caps
        self._tty = out.stream.isatty()
        self._drawn = 0
        self._last_minute: str | None = None
        self._last_state: str | None = None

    def show(self, snapshot: Snapshot) -> None:
        if self._tty:
            lines = render_table(snapshot, self._night, self._caps)
            if self._drawn:
                self._out.stream.write(f"\x1b[{self._drawn}F\x1b[J")
            self._out.stream.write("\n".join(lines) + "\n")
            self._out.stream.flush()
            self._drawn = len(lines)
            return
        minute = self._night.label(snapshot.at)
        if minute == self._last_minute or snapshot.at < self._night.start:
            return
        self._last_minute = minute
        line = render_line(snapshot, self._night)
        # A line when the counts changed or tokens were granted, and every ten minutes to show the
        # clock moving.
        counts, tokens = line.split(" | ", 1)[1].rsplit(" | ", 1)
        state = counts if tokens.endswith(": 0") else line
        if state != self._last_state or snapshot.at.minute % 10 == 0:
            self._last_state = state
            self._out.line(line)
