"""The suite's own order (`tests/conftest.py::_dealt`): under xdist's worksteal each worker's
first slice starts with its share of the slow tests, and no test is lost or run twice."""

from __future__ import annotations

import pytest

from tests.conftest import _dealt


def _slices(order: list[str], workers: int) -> list[list[str]]:
    """The slices worksteal's first distribution cuts (`xdist.scheduler.worksteal`)."""
    pending, cut = list(order), []
    for remaining in range(workers, 0, -1):
        size = len(pending) // remaining
        cut.append(pending[:size])
        del pending[:size]
    return cut


@pytest.mark.parametrize(
    ("slow_count", "fast_count", "workers"),
    [(10, 90, 4), (3, 50, 4), (7, 3, 2), (0, 20, 4), (5, 0, 3), (9, 40, 1)],
)
def test_every_slice_starts_with_its_share_of_the_slow_tests(
    slow_count: int, fast_count: int, workers: int
) -> None:
    slow = [f"slow{i}" for i in range(slow_count)]
    fast = [f"fast{i}" for i in range(fast_count)]
    order = _dealt(slow, fast, workers)
    assert sorted(order) == sorted(slow + fast)  # nothing lost, nothing twice
    if slow_count <= (slow_count + fast_count) // workers:
        for index, share in enumerate(_slices(order, workers)):
            expected = slow[index::workers]
            assert share[: len(expected)] == expected


def test_slow_tests_sorted_to_the_front_would_all_land_in_the_first_slice() -> None:
    # The failure this order exists for: the plain sort put every slow test in worker 0's slice.
    slow = [f"slow{i}" for i in range(8)]
    fast = [f"fast{i}" for i in range(92)]
    first = _slices(slow + fast, 4)[0]
    assert set(slow) <= set(first)
    dealt_first = _slices(_dealt(slow, fast, 4), 4)[0]
    assert [name for name in dealt_first if name.startswith("slow")] == ["slow0", "slow4"]
