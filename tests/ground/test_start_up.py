"""`ground.start_up`: the collector paused while a program imports, what the imports made frozen,
and the collector left as it was found — also when the imports fail."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from ground.start_up import set_aside_start_up_objects, start_up_imports


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    # Objects frozen by a test would never be collected in this worker: unfreeze them after.
    was_enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if was_enabled:
        gc.enable()
    else:
        gc.disable()


class _Made:
    """A cyclic object: one the collector tracks."""

    def __init__(self) -> None:
        self.me = self


def test_the_collector_is_paused_inside_and_running_again_after() -> None:
    gc.enable()
    with start_up_imports():
        assert not gc.isenabled()
    assert gc.isenabled()


def _collectable(obj: object) -> bool:
    """Whether `obj` is in any of the collector's generations (a frozen object is in none)."""
    return any(obj is tracked for tracked in gc.get_objects())


def test_what_the_imports_made_is_frozen_and_not_collected_later() -> None:
    gc.unfreeze()
    with start_up_imports():
        made = _Made()
    assert gc.get_freeze_count() > 0
    # A frozen object is in no generation: no collection even looks at it.
    assert not _collectable(made)


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with start_up_imports():
        pass
    assert not gc.isenabled()


def test_a_failing_import_leaves_the_collector_running() -> None:
    gc.enable()
    with pytest.raises(ModuleNotFoundError), start_up_imports():
        __import__("nachtwacht_no_such_module")
    assert gc.isenabled()


def test_set_aside_freezes_what_was_made_since() -> None:
    gc.unfreeze()
    set_aside_start_up_objects()
    made = _Made()
    assert _collectable(made)
    # The count is no measure: frozen objects that die leave the permanent generation.
    assert set_aside_start_up_objects() > 0
    assert not _collectable(made)
