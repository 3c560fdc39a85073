"""HTTP's `Date` form (RFC 9110's IMF-fixdate), the one form an agent sends its host's clock in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from ground.instants import format_http_date, parse_http_date


def test_an_instant_is_written_to_the_second_in_gmt_and_read_back() -> None:
    instant = datetime(2026, 11, 30, 3, 4, 5, 678_000, tzinfo=timezone(timedelta(hours=1)))
    written = format_http_date(instant)
    assert written == "Mon, 30 Nov 2026 02:04:05 GMT"
    assert parse_http_date(written) == datetime(2026, 11, 30, 2, 4, 5, tzinfo=UTC)


def test_a_naive_instant_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="aware"):
        format_http_date(datetime(2026, 11, 30, 2, 0))


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "Mon, 30 Nov 2026 02:04:05 GMT ",
        "mon, 30 Nov 2026 02:04:05 GMT",
        "Tue, 30 Nov 2026 02:04:05 GMT",  # 30 November 2026 is a Monday
        "Mon, 30 Nov 2026 24:00:00 GMT",
        "Mon, 3 Nov 2026 02:04:05 GMT",
        "Mon, ٣٠ Nov 2026 02:04:05 GMT",  # Arabic-Indic digits
        "Thu, 01 Jan 1970 00:00:00 UTC",
    ],
)
def test_anything_else_is_none(text: str | None) -> None:
    assert parse_http_date(text) is None


def test_the_first_second_of_1970_is_read() -> None:
    assert parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT") == datetime(1970, 1, 1, tzinfo=UTC)
