"""A lasting condition is said the first time, then at most once every so often; another one at
once; its end says how long it held."""

from __future__ import annotations

from control_plane.repeated_warning import Repeat, RepeatedWarning


def test_a_lasting_condition_is_said_first_then_once_a_period_with_the_count_between() -> None:
    seconds = [100.0]
    warning = RepeatedWarning(60, monotonic=lambda: seconds[0])
    assert warning.holds("down") == Repeat(first=True, held_seconds=0.0, unsaid=0)
    seconds[0] += 59
    assert warning.holds("down") is None
    assert warning.holds("down") is None
    seconds[0] += 1
    assert warning.holds("down") == Repeat(first=False, held_seconds=60.0, unsaid=2)
    seconds[0] += 1
    assert warning.holds("down") is None


def test_another_condition_is_said_at_once() -> None:
    seconds = [0.0]
    warning = RepeatedWarning(60, monotonic=lambda: seconds[0])
    warning.holds("fenced: timeline 1")
    seconds[0] += 1
    assert warning.holds("fenced: another cluster") == Repeat(
        first=True, held_seconds=0.0, unsaid=0
    )


def test_its_end_says_how_long_it_held_and_the_next_time_is_a_first_again() -> None:
    seconds = [0.0]
    warning = RepeatedWarning(60, monotonic=lambda: seconds[0])
    assert warning.ended() is None
    warning.holds()
    seconds[0] += 75
    assert warning.ended() == 75.0
    assert warning.ended() is None
    seconds[0] += 1
    assert warning.holds() == Repeat(first=True, held_seconds=0.0, unsaid=0)
