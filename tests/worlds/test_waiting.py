"""`wait_until` returns what the condition found, and gives up at its deadline saying on what."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests.worlds.waiting import wait_until


def test_the_first_truthy_value_is_returned() -> None:
    answers: Iterator[object] = iter([None, 0, [], {"run": "succeeded"}])
    assert wait_until(lambda: next(answers), what="a run", interval=0) == {"run": "succeeded"}


def test_a_condition_that_never_holds_fails_naming_what_was_awaited() -> None:
    polls = itertools.count()
    with pytest.raises(AssertionError, match=r"after 0\.2 s: the run stayed 'running' \(\d+\)"):
        wait_until(
            lambda: next(polls) < 0,
            what=lambda: f"the run stayed 'running' ({next(polls)})",
            timeout=0.2,
            interval=0.01,
        )
