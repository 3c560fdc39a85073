"""Every reader of a date or a time holds the text to its one documented form. Python 3.11's
`fromisoformat` reads much more — week dates, ordinal dates, the basic format, an hour alone, a
comma before the fraction — and a reader that trusted it took `2026-W49-2` for 2026-12-01."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from ground.clock import ClockConfigError, parse_fake_clock
from ground.instants import InstantError, parse_day_text, parse_instant, parse_written_time

# Forms `fromisoformat` accepts (3.11+) that no reader here documents. Each names 2026-12-01 or
# 2026-12-01 03:00 UTC, so a reader that takes one takes a real, plausible moment.
OTHER_DATE_FORMS = [
    pytest.param("2026-W49-2", id="week_date"),
    pytest.param("2026W492", id="week_date_basic"),
    pytest.param("2026-335", id="ordinal_date"),
    pytest.param("20261201", id="basic_date"),
    pytest.param("2026-12-1", id="one_digit_day"),
    pytest.param("\u0662\u0660\u0662\u0666-\u0661\u0662-\u0660\u0661", id="arabic_indic_digits"),
    pytest.param(" 2026-12-01", id="leading_space"),
    pytest.param("2026-12-01\n", id="trailing_newline"),
]
OTHER_INSTANT_FORMS = [
    pytest.param("2026-W49-2T03:00:00Z", id="week_date"),
    pytest.param("2026-335T03:00:00Z", id="ordinal_date"),
    pytest.param("20261201T030000Z", id="basic_format"),
    pytest.param("2026-12-01T030000Z", id="basic_time"),
    pytest.param("2026-12-01T03Z", id="hour_alone"),
    pytest.param("2026-12-01T03:00Z", id="no_seconds"),
    pytest.param("2026-12-01T03:00:00,5Z", id="comma_fraction"),
    pytest.param("2026-12-01T03:00:00+0000", id="basic_offset"),
    pytest.param("2026-12-01T03:00:00+00", id="hour_offset"),
    pytest.param("2026-12-01 03:00:00Z", id="space_for_t"),
    pytest.param("2026-12-01T03:00:00Z\n", id="trailing_newline"),
    pytest.param("2026-12-01", id="date_alone"),
]


@pytest.mark.parametrize("text", OTHER_DATE_FORMS)
def test_a_day_in_another_form_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="is not in the form YYYY-MM-DD"):
        parse_day_text(text)


def test_a_day_in_its_form_is_read_and_the_calendar_still_checked() -> None:
    assert parse_day_text("2026-12-01") == date(2026, 12, 1)
    with pytest.raises(ValueError):
        parse_day_text("2026-02-30")


@pytest.mark.parametrize("text", OTHER_INSTANT_FORMS)
def test_an_instant_in_another_form_is_not_rfc_3339(text: str) -> None:
    with pytest.raises(InstantError, match=r"^at: .* is not an RFC 3339 instant"):
        parse_instant(text, field="at")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("2026-12-01T03:00:00Z", id="z"),
        pytest.param("2026-12-01t03:00:00z", id="lower_case"),
        pytest.param("2026-12-01T04:00:00+01:00", id="offset"),
        pytest.param("2026-12-01T03:00:00.000000000Z", id="nanosecond_fraction"),
    ],
)
def test_an_rfc_3339_instant_is_read(text: str) -> None:
    assert parse_instant(text) == datetime(2026, 12, 1, 3, 0, tzinfo=UTC)


def test_a_naive_rfc_3339_reading_is_named_for_its_missing_offset() -> None:
    with pytest.raises(InstantError, match="has no offset") as refused:
        parse_instant("2026-12-01T03:00:00")
    assert refused.value.without_offset


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("2026-W49-2T03:00Z", id="week_date"),
        pytest.param("2026-335T03:00Z", id="ordinal_date"),
        pytest.param("20261201T0300Z", id="basic_format"),
        pytest.param("2026-12-01T03Z", id="hour_alone"),
        pytest.param("2026-12-01T03:00:00.5Z", id="fraction"),
        pytest.param("2026-12-01T03:00+0000", id="basic_offset"),
    ],
)
def test_a_written_time_in_another_form_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="is not in the form YYYY-MM-DDTHH:MM"):
        parse_written_time(text)


def test_a_written_time_without_its_offset_is_named_so() -> None:
    with pytest.raises(InstantError, match="has no offset") as refused:
        parse_written_time("2026-12-01T03:00")
    assert refused.value.without_offset


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("2026-12-01T03:00Z", id="minutes"),
        pytest.param("2026-12-01 04:00:00+01:00", id="space_seconds_offset"),
    ],
)
def test_a_written_time_is_read(text: str) -> None:
    assert parse_written_time(text) == datetime(2026, 12, 1, 3, 0, tzinfo=UTC)


# The setting's parts are stripped of spaces, so a trailing newline is no other form there.
@pytest.mark.parametrize(
    "text", [form for form in OTHER_INSTANT_FORMS if form.id != "trailing_newline"]
)
def test_a_fake_clock_start_in_another_form_is_refused(text: str) -> None:
    with pytest.raises(ClockConfigError, match=r"is not an ISO 8601 instant|has no time zone"):
        parse_fake_clock(f"{text},speed=1", read_at=0.0)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("0001-01-01T00:00:00+14:00", id="year_0_in_utc"),
        pytest.param("9999-12-31T23:59:59-14:00", id="year_10000_in_utc"),
    ],
)
def test_an_instant_its_offset_carries_past_the_calendar_is_refused_by_name(text: str) -> None:
    with pytest.raises(InstantError, match=r"^since: .* years 1 and 9999"):
        parse_instant(text, field="since")
