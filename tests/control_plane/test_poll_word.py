"""What a poll says of its host, read from its headers: a value that cannot be read says nothing,
and never refuses the poll."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from control_plane.poll_word import PollWord
from ground.limits import MAX_HOST_CLOCK_OFFSET_SECONDS

NOW = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
NOW_SAID = "Sun, 29 Mar 2026 01:00:00 GMT"


def read(*, trust_root: str | None = None, dates: tuple[str, ...] = (NOW_SAID,)) -> PollWord:
    return PollWord.read(host_id="host-a", trust_root=trust_root, dates=dates, now=NOW)


def test_a_poll_with_one_readable_date_says_its_hosts_clock() -> None:
    word = read(dates=("Sun, 29 Mar 2026 01:00:07 GMT",))
    assert (word.clock, word.no_date, word.says_clock, word.clock_off) == (7, False, True, False)


def test_a_clock_further_off_than_the_agent_follows_is_off_and_one_within_is_not() -> None:
    assert PollWord(clock=MAX_HOST_CLOCK_OFFSET_SECONDS + 1).clock_off
    assert PollWord(clock=-MAX_HOST_CLOCK_OFFSET_SECONDS - 1).clock_off
    assert not PollWord(clock=MAX_HOST_CLOCK_OFFSET_SECONDS).clock_off


def test_a_poll_without_a_date_says_it_has_none() -> None:
    word = read(dates=())
    assert (word.clock, word.no_date, word.says_clock, word.clock_off) == (None, True, True, False)


@pytest.mark.parametrize(
    "dates",
    [
        (NOW_SAID, NOW_SAID),  # sent twice: no one value
        ("yesterday",),
        ("Sun, 29 Mar 2026 01:00:00 CET",),
        ("Sun, 29 Mar 2226 01:00:00 GMT",),  # beyond belief: a made-up value
        ("",),
    ],
)
def test_a_date_that_cannot_be_read_says_nothing_either_way(dates: tuple[str, ...]) -> None:
    word = read(dates=dates)
    assert (word.clock, word.no_date, word.says_clock) == (None, False, False)


@pytest.mark.parametrize(
    ("header", "held"),
    [
        ("3", 3),
        ("2147483647", 2_147_483_647),
        (None, None),
        ("0", None),
        ("-1", None),
        ("03", None),
        ("2147483648", None),  # beyond the column
        ("1e3", None),
        (" 3", None),
        ("٣", None),  # a digit, but not an ASCII one
    ],
)
def test_the_trust_root_held_is_a_positive_integer_the_column_stores(
    header: str | None, held: int | None
) -> None:
    assert read(trust_root=header).held == held
