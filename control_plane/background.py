"""A named daemon thread that runs one loop until it is told to stop.

The change feed, the refusal flusher and the reconcile worker each own one: their loop sleeps in
`wait`, so `stop` wakes it at once instead of after a whole interval, and `stop` returns only once
the loop has ended (what the owner closes next is no longer in use).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["LoopThread"]


class LoopThread:
    def __init__(self, name: str) -> None:
        self._name = name
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def start(self, loop: Callable[[], None]) -> None:
        """Run `loop` in the thread; it is to return once `stopping` (or `wait`) says so. A
        second start while it runs does nothing: one loop per owner."""
        if self._thread is not None:
            return
        self._stopping.clear()
        self._thread = threading.Thread(target=loop, name=self._name, daemon=True)
        self._thread.start()

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds` (real time); True, at once, when a stop is asked."""
        return self._stopping.wait(seconds)

    def ask_to_stop(self) -> None:
        """Ask the loop to stop without waiting for it (its owner may have to wake it first)."""
        self._stopping.set()

    def stop(self) -> None:
        """Ask the loop to stop and wait until it has (nothing to do when it never started)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
