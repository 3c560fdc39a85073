"""The one line `nachtwacht control serve` prints when it accepts requests, and how to wait for it.

Whoever starts the control plane as a process (the demo, the tests, the benchmarks) learns its URL
from this line; printer and readers share the marker here so they cannot drift apart.
"""

from __future__ import annotations

import threading
from typing import IO

__all__ = ["READY_MARKER", "ready_line", "wait_for_ready_url"]

READY_MARKER = "ready at "


def ready_line(url: str) -> str:
    return f"nachtwacht control plane {READY_MARKER}{url}"


def wait_for_ready_url(stdout: IO[str], *, timeout_seconds: float) -> str | None:
    """The URL from the ready line on `stdout`, or None when it did not come within the timeout."""
    found: list[str] = []

    def read() -> None:
        for line in stdout:
            if READY_MARKER in line:
                found.append(line.split(READY_MARKER, 1)[1].strip())
                return

    # A thread, because a blocking readline cannot be given a timeout portably.
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout_seconds)
    return found[0] if found else None
