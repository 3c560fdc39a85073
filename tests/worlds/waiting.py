"""Waiting for something to happen: a condition polled until it holds, bounded by a deadline.

    run = wait_until(lambda: finished_run(host), what="web-01's run to finish")

The deadline is for a failure, never a speed expectation: a healthy world gets there in a
fraction of it. A test waits for what it needs, not for a number of seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["DEADLINE_SECONDS", "wait_until"]

DEADLINE_SECONDS = 120.0

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    *,
    what: str | Callable[[], str],
    timeout: float = DEADLINE_SECONDS,
    interval: float = 0.05,
) -> T:
    """The first truthy value of `condition()`; AssertionError naming `what` (a text, or a
    function that describes the state given up on) once `timeout` real seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            described = what() if callable(what) else what
            raise AssertionError(f"gave up waiting after {timeout:g} s: {described}")
        time.sleep(interval)
