"""The cyclic garbage collector at start-up: paused while a program imports, and what the imports
made set aside for good.

Importing the control plane creates ~600,000 objects, nearly all of which live as long as the
process (modules, classes, functions, pydantic's schemas). CPython's collector counts those
allocations and walks them again and again while they are being made — ~260 collections, two of
them full — and once more in the first young collections after start-up, when all of them are
still "young". Import makes almost no cyclic garbage, so nothing is lost by not collecting it.

`start_up_imports()` pauses the collector for the block, then `gc.freeze()`s every object it
tracks — they move to the permanent generation, which no collection walks — and restores the
collector as it was (also when the block raises). `set_aside_start_up_objects()` freezes again
where a server has built what it serves with (the app and its routes), just before serving; in the
supervisor it comes right before the workers are forked, so their collections never write to (and
so copy) the inherited pages — Python's documented use of `gc.freeze()`.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["set_aside_start_up_objects", "start_up_imports"]


@contextmanager
def start_up_imports() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def set_aside_start_up_objects() -> int:
    """Freeze every object the collector tracks now; returns how many are frozen. No collection
    first (Python's own advice for freeze before fork): it would walk the whole heap once more,
    for the little cyclic garbage that start-up leaves."""
    gc.freeze()
    return gc.get_freeze_count()
