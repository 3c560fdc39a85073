"""Rule 3: one pattern, refused with a message naming the index, the value and the rule."""

from __future__ import annotations

import re
from datetime import UTC, time

import pytest

from shared_planner import MAX_TIMES, TIME_PATTERN, InvalidSchedule, parse_times, schedule_error


def test_the_pattern_string_is_the_one_the_database_uses() -> None:
    assert TIME_PATTERN == "^([01][0-9]|2[0-3]):[0-5][05]$"


def test_valid_times_parse_in_their_given_order() -> None:
    assert parse_times(["23:55", "00:00", "03:05"]) == (time(23, 55), time(0, 0), time(3, 5))


def test_every_grid_point_of_the_day_is_accepted_and_nothing_else_matches() -> None:
    grid = [f"{h:02d}:{m:02d}" for h in range(24) for m in range(0, 60, 5)]
    assert len(parse_times(grid)) == MAX_TIMES
    every_minute = [f"{h:02d}:{m:02d}" for h in range(24) for m in range(60)]
    matching = [value for value in every_minute if re.fullmatch(TIME_PATTERN, value)]
    assert matching == grid


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param(
            ["03:00", "03:07"],
            "times[1]: '03:07' is not on the five-minute grid (use HH:MM, e.g. 03:05)",
            id="off_grid",
        ),
        pytest.param(
            ["3:00"],
            "times[0]: '3:00' is not a 24-hour time of day (use HH:MM, e.g. 03:05)",
            id="one_digit_hour",
        ),
        pytest.param(
            ["24:00"],
            "times[0]: '24:00' is not a 24-hour time of day (use HH:MM, e.g. 03:05)",
            id="hour_24",
        ),
        pytest.param(
            ["03:00\n"],
            "times[0]: '03:00\\n' is not a 24-hour time of day (use HH:MM, e.g. 03:05)",
            id="trailing_newline_that_python_dollar_accepts",
        ),
        pytest.param(
            [" 03:00"],
            "times[0]: ' 03:00' is not a 24-hour time of day (use HH:MM, e.g. 03:05)",
            id="leading_space",
        ),
        pytest.param(
            ["03:00:00"],
            "times[0]: '03:00:00' is not a 24-hour time of day (use HH:MM, e.g. 03:05)",
            id="with_seconds",
        ),
        pytest.param(
            ["\uff10\uff13:\uff10\uff10"],
            "times[0]: '\uff10\uff13:\uff10\uff10' is not a 24-hour time of day "
            "(use HH:MM, e.g. 03:05)",
            id="fullwidth_digits",
        ),
        pytest.param([3], "times[0]: 3 is not a string (use HH:MM, e.g. 03:05)", id="number"),
        pytest.param([None], "times[0]: null is not a string (use HH:MM, e.g. 03:05)", id="null"),
        pytest.param(
            [{"a": 1}], 'times[0]: {"a": 1} is not a string (use HH:MM, e.g. 03:05)', id="object"
        ),
        pytest.param(
            [["03:00"]],
            'times[0]: ["03:00"] is not a string (use HH:MM, e.g. 03:05)',
            id="nested_list",
        ),
        pytest.param(
            ["03:00", "04:00", "03:00"],
            "times[2]: '03:00' repeats times[0] (each time may appear once)",
            id="duplicate",
        ),
        pytest.param(
            [],
            'times: [] is empty (an enabled schedule needs at least one time, e.g. ["03:00"])',
            id="empty",
        ),
        pytest.param(
            "03:00",
            "times: '03:00' is not a list of times (expected e.g. [\"03:00\"])",
            id="bare_string",
        ),
        pytest.param(
            None, 'times: null is not a list of times (expected e.g. ["03:00"])', id="none"
        ),
        pytest.param(
            {"03:00": True},
            'times: {"03:00": true} is not a list of times (expected e.g. ["03:00"])',
            id="json_object_whose_keys_look_like_times",
        ),
        pytest.param(
            {"03:00"},
            "times: {'03:00'} is not a list of times (expected e.g. [\"03:00\"])",
            id="unordered_set",
        ),
    ],
)
def test_bad_values_are_refused_naming_index_value_and_rule(values: object, message: str) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        parse_times(values)  # type: ignore[arg-type]
    assert str(caught.value) == message
    assert isinstance(caught.value, ValueError)


def test_more_than_a_day_of_grid_points_is_refused() -> None:
    grid = [f"{h:02d}:{m:02d}" for h in range(24) for m in range(0, 60, 5)]
    with pytest.raises(InvalidSchedule, match=r"^times: '289 entries' are more than the 288 "):
        parse_times([*grid, "00:00"])


def test_parsed_times_are_held_to_the_same_rules() -> None:
    assert parse_times([time(3, 5)]) == (time(3, 5),)
    with pytest.raises(InvalidSchedule, match="five-minute grid"):
        parse_times([time(3, 7)])
    with pytest.raises(InvalidSchedule, match="five-minute grid"):
        parse_times([time(3, 5, 30)])
    with pytest.raises(InvalidSchedule, match="time zone"):
        parse_times([time(3, 5, tzinfo=UTC)])


def test_customer_message_names_the_api_field() -> None:
    assert schedule_error(["03:00", "03:07"], field="schedule.times") == (
        "schedule.times[1]: '03:07' is not on the five-minute grid (use HH:MM, e.g. 03:05)"
    )
    assert schedule_error(["03:00", "03:00"], field="schedule.times") == (
        "schedule.times[1]: '03:00' repeats schedule.times[0] (each time may appear once)"
    )
    assert schedule_error(["03:00"]) is None


def test_a_long_bad_value_is_shortened_in_the_message() -> None:
    message = schedule_error(["9" * 10_000])
    assert message is not None
    assert len(message) < 120
