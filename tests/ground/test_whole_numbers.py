"""A number read from text is ASCII digits and nothing else."""

from __future__ import annotations

import pytest

from ground.whole_numbers import decimal_number, integer, whole_number


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


@pytest.mark.parametrize(
    ("text", "number"),
    [("0", 0.0), ("7", 7.0), ("2.5", 2.5), ("0.1", 0.1), ("007.50", 7.5), ("9" * 19, 1e19 - 1)],
)
def test_a_decimal_number_is_ascii_digits_with_one_point_between_them(
    text: str, number: float
) -> None:
    assert decimal_number(text) == number


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("\u0663", id="arabic_indic"),
        pytest.param("2.\u0665", id="arabic_indic_decimals"),
        pytest.param("1_0", id="underscore"),
        pytest.param("1.0_0", id="underscore_in_decimals"),
        pytest.param(" 5 ", id="spaces"),
        pytest.param("5.", id="no_decimals"),
        pytest.param(".5", id="no_whole"),
        pytest.param("1.2.3", id="two_points"),
        pytest.param("1e3", id="exponent"),
        pytest.param("-1.5", id="minus"),
        pytest.param("+1.5", id="plus"),
        pytest.param("nan", id="nan"),
        pytest.param("inf", id="inf"),
        pytest.param("1" * 10 + "." + "1" * 10, id="twenty_digits_in_all"),
    ],
)
def test_anything_else_is_not_a_decimal_number(text: str) -> None:
    assert decimal_number(text) is None
