"""A number read from text is ASCII digits and nothing else."""

from __future__ import annotations

import pytest

from ground.whole_numbers import integer, whole_number


@pytest.mark.parametrize(
    ("text", "number"), [("0", 0), ("7", 7), ("007", 7), ("9" * 19, 10**19 - 1)]
)
def test_ascii_digits_are_a_number(text: str, number: int) -> None:
    assert whole_number(text) == number


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("²", id="superscript"),
        pytest.param("٣", id="arabic_indic"),
        pytest.param("\uff13", id="fullwidth"),
        pytest.param("1_0", id="underscore"),
        pytest.param(" 5", id="space"),
        pytest.param("5\n", id="newline"),
        pytest.param("+5", id="plus"),
        pytest.param("-5", id="minus"),
        pytest.param("5.0", id="decimal"),
        pytest.param("1" * 20, id="longer_than_any_64_bit_number"),
    ],
)
def test_anything_else_is_not_a_number(text: str) -> None:
    assert whole_number(text) is None


def test_a_caller_may_ask_for_fewer_digits() -> None:
    assert whole_number("4194304", max_digits=7) == 4194304
    assert whole_number("41943040", max_digits=7) is None


@pytest.mark.parametrize(
    ("text", "number"),
    [("0", 0), ("-0", 0), ("-3", -3), ("42", 42), ("--3", None), ("-", None), ("+3", None)],
)
def test_an_integer_is_a_whole_number_with_an_optional_minus(text: str, number: int | None) -> None:
    assert integer(text) == number


def test_an_integer_of_other_digits_is_not_one() -> None:
    assert integer("-\u0663") is None
    assert integer("\u0663") is None
