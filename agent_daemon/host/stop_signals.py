"""SIGTERM and SIGINT, turned into a set `threading.Event` without a lock taken in a handler.

A Python signal handler runs in the main thread between two bytecodes, wherever that thread is.
A handler that called `stop.set()` could hang the daemon for good: when the signal lands while
the main thread is inside `stop.wait()` holding the event's lock (it is not reentrant), `set()`
waits for a lock its own thread holds, and systemd has to kill the daemon at its stop timeout.

So the handler does nothing. The interpreter writes each signal's number to a socket
(`signal.set_wakeup_fd`), and a watcher thread reads it and sets the event from ordinary code.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ["STOP_SIGNALS", "stop_on_signals"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _take_no_action(_signum: int, _frame: FrameType | None) -> None:
    """The byte on the wakeup socket is the signal's whole effect."""


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """While inside, SIGTERM and SIGINT set `stop`; on leaving, the previous handlers and wakeup
    socket are back. Call from the main thread (only it may install handlers)."""
    readable, writable = socket.socketpair()
    # The interpreter writes from its C-level handler: it must never block there.
    writable.setblocking(False)
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    previous_fd = signal.set_wakeup_fd(writable.fileno(), warn_on_full_buffer=False)

    def watch() -> None:
        # Every signal with a Python handler writes its number here; only ours stop the daemon.
        while numbers := readable.recv(64):
            if any(number in STOP_SIGNALS for number in numbers):
                stop.set()

    watcher = threading.Thread(target=watch, name="stop-signals", daemon=True)
    watcher.start()
    try:
        for signum in STOP_SIGNALS:
            signal.signal(signum, _take_no_action)
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        signal.set_wakeup_fd(previous_fd)
        writable.close()  # the watcher reads the end of the stream and returns
        watcher.join()
        readable.close()
