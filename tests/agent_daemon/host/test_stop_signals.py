"""SIGTERM and SIGINT stop the daemon even when they land while its main thread holds the stop
event's lock (a handler that set the event itself hung there for good)."""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

from agent_daemon.host.stop_signals import STOP_SIGNALS, stop_on_signals


def test_the_handler_returns_while_its_thread_holds_the_stop_events_lock() -> None:
    stop = threading.Event()
    with stop_on_signals(stop):
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler)

        def land_inside_wait() -> None:
            # Where the main thread is inside `stop.wait()`: between waking and leaving, it holds
            # the event's condition lock, and a handler then runs on that same thread.
            with stop._cond:  # type: ignore[attr-defined]  # the lock the hang was about
                handler(signal.SIGTERM, None)

        thread = threading.Thread(target=land_inside_wait, daemon=True)
        thread.start()
        thread.join(timeout=5)
        assert not thread.is_alive(), "the signal handler waited for a lock its thread holds"


def test_each_stop_signal_sets_the_event_and_others_do_not() -> None:
    heard: list[int] = []

    def own_handler(signum: int, _frame: FrameType | None) -> None:
        heard.append(signum)

    before = signal.signal(signal.SIGUSR1, own_handler)
    try:
        for signum in STOP_SIGNALS:
            stop = threading.Event()
            with stop_on_signals(stop):
                # Another signal with a Python handler also writes to the wakeup socket.
                os.kill(os.getpid(), signal.SIGUSR1)
                assert not stop.wait(0.5)
                os.kill(os.getpid(), signum)
                assert stop.wait(10), f"{signum.name} did not set the stop event"
        assert heard == [signal.SIGUSR1, signal.SIGUSR1]
    finally:
        signal.signal(signal.SIGUSR1, before)


def test_leaving_puts_back_the_handlers_and_wakeup_socket_it_found() -> None:
    def earlier(_signum: int, _frame: FrameType | None) -> None:
        pass

    before = {signum: signal.signal(signum, earlier) for signum in STOP_SIGNALS}
    try:
        with stop_on_signals(threading.Event()):
            assert signal.getsignal(signal.SIGTERM) is not earlier
        assert all(signal.getsignal(signum) is earlier for signum in STOP_SIGNALS)
        # No wakeup socket was set before: none is left behind.
        assert signal.set_wakeup_fd(-1) == -1
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
