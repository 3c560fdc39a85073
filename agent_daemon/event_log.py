"""One structured line per event, to stdout (journald keeps it).

A line is a JSON object: `ts` (server time as the agent sees it), `event`, `level`, and the fields
that matter for the event — always `slot_key` and `run_id` when there are any. No stack traces: an
unexpected failure is one line naming its type and message.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Literal, TextIO

__all__ = ["EventLog", "Level"]

Level = Literal["info", "warning", "error"]


class EventLog:
    def __init__(self, *, now: Callable[[], datetime], stream: TextIO | None = None) -> None:
        self._now = now
        self._stream = stream
        self._lock = threading.Lock()

    def emit(self, event: str, *, level: Level = "info", **fields: object) -> None:
        line: dict[str, object] = {
            "ts": self._now().isoformat().replace("+00:00", "Z"),
            "level": level,
            "event": event,
        }
        line.update({k: v for k, v in fields.items() if v is not None})
        text = json.dumps(line, default=str, ensure_ascii=False)
        stream = self._stream if self._stream is not None else sys.stdout
        with self._lock:
            try:
                stream.write(text + "\n")
                stream.flush()
            except (OSError, ValueError):
                # A closed or full stdout must not take the daemon down with it.
                pass
