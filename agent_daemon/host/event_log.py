"""One structured line per event, to stdout, written for journald.

A line is `<N>` followed by a JSON object. `<N>` is the syslog priority (3 error, 4 warning,
6 info): systemd reads it off the line (`SyslogLevelPrefix=true`, its default, in the unit) and
stores the line at that priority, so `journalctl -u nachtwacht-agent -p warning` shows exactly
the warnings and errors. The object holds:

- `mono`: seconds on the host's monotonic clock — it never runs backwards, so lines sort by it;
- `server_time`: the control plane's time as the agent estimates it when the line is written. It
  is a separate field because it can step back when the agent learns a better offset;
- `level`, `event`, and the fields that matter for the event — always `slot_key` and `run_id` when
  there are any.

No stack traces: an unexpected failure is one line naming its type and message. Observers (the
daemon's activity, which words `STATUS=` and `agent status`) see every event as it is written.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Literal, TextIO

__all__ = ["PRIORITIES", "EventLog", "Level", "Observer", "parse_line"]

Level = Literal["info", "warning", "error"]
Observer = Callable[[str, Level, dict[str, object]], None]

# syslog(3) priorities, as journald reads them from a `<N>` prefix.
PRIORITIES: dict[Level, int] = {"error": 3, "warning": 4, "info": 6}
_LEVEL_OF: dict[str, str] = {str(priority): level for level, priority in PRIORITIES.items()}


class EventLog:
    def __init__(
        self,
        *,
        now: Callable[[], datetime],
        stream: TextIO | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._now = now
        self._stream = stream
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._observers: list[Observer] = []

    def observe(self, observer: Observer) -> None:
        """Call `observer(event, level, fields)` for every line from now on (after it is written).
        An observer must not raise; if it does, the line still stands and the error is dropped."""
        self._observers.append(observer)

    def emit(self, event: str, *, level: Level = "info", **fields: object) -> None:
        shown = {k: v for k, v in fields.items() if v is not None}
        line: dict[str, object] = {
            "mono": round(self._monotonic(), 3),
            "server_time": self._now().isoformat().replace("+00:00", "Z"),
            "level": level,
            "event": event,
        }
        line.update(shown)
        text = f"<{PRIORITIES[level]}>" + json.dumps(line, default=str, ensure_ascii=False)
        stream = self._stream if self._stream is not None else sys.stdout
        with self._lock:
            try:
                stream.write(text + "\n")
                stream.flush()
            except (OSError, ValueError):
                # A closed or full stdout must not take the daemon down with it.
                pass
        for observer in self._observers:
            # A status display must never cost the daemon a minute.
            with contextlib.suppress(Exception):
                observer(event, level, shown)


def parse_line(text: str) -> dict[str, object]:
    """A log line back as its JSON object, the `<N>` prefix checked against its `level`.
    Raises ValueError for a line this module did not write."""
    priority = ""
    if text.startswith("<"):
        priority, _, text = text[1:].partition(">")
    document = json.loads(text)
    if not isinstance(document, dict):
        raise ValueError(f"log line: expected a JSON object, found {text[:40]!r}")
    if priority and _LEVEL_OF.get(priority) != document.get("level"):
        raise ValueError(
            f"log line: priority <{priority}> does not match level {document.get('level')!r}"
        )
    return document
