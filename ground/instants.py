"""The one way an instant crosses the network: RFC 3339 in UTC with a `Z`, to the second.

`2026-11-30T02:00:00Z`. Standard library only: the release format and the planner's shells use
it as well as the contract. Every time the control plane sends (the server-time header, the config's
`server_time`, token expiries, run and event times) is written by `format_instant`, and every time
a program reads from the other is read by `parse_instant`, which accepts any RFC 3339 offset and
refuses a reading without one (a naive time means a different instant on every host).

Python's `fromisoformat` reads far more than these forms since 3.11 (week dates `2026-W49-2`,
ordinal dates `2026-335`, the basic format `20261201T0300Z`, an hour alone, a comma before the
fraction): each reader here first holds the text to its one documented form, in ASCII digits,
and only then lets `fromisoformat` check the calendar.

    parse_instant       RFC 3339: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`
    parse_day_text      a calendar date: `YYYY-MM-DD`
    parse_written_time  a time a person types on a command line: `YYYY-MM-DD[T ]HH:MM[:SS]`
                        with `Z` or `±HH:MM` (`2026-12-01T04:00Z`)

One other form: HTTP's own `Date` header (RFC 9110's IMF-fixdate, `Mon, 30 Nov 2026 02:00:00
GMT`), which an agent sends with its host's clock (`format_http_date`, `parse_http_date`).
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from email.utils import format_datetime

__all__ = [
    "DAY_TEXT",
    "RFC_3339_PATTERN",
    "InstantError",
    "format_http_date",
    "format_instant",
    "parse_day_text",
    "parse_http_date",
    "parse_instant",
    "parse_written_time",
]

# `[0-9]`, never `\d`: `\d` also matches the digits of other scripts.
DAY_TEXT = r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
_DAY = re.compile(DAY_TEXT)
_OFFSET = r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})"
_FRACTION = r"(?:\.[0-9]{1,9})?"
_RFC_3339 = re.compile(rf"{DAY_TEXT}[Tt][0-9]{{2}}:[0-9]{{2}}:[0-9]{{2}}{_FRACTION}")
# The whole form as one anchored pattern, for a schema that states what `parse_instant` takes.
RFC_3339_PATTERN = f"^{_RFC_3339.pattern}{_OFFSET}$"
_WRITTEN = re.compile(rf"{DAY_TEXT}[Tt ][0-9]{{2}}:[0-9]{{2}}(?::[0-9]{{2}})?{_OFFSET}")

# The longest RFC 3339 reading worth parsing: "2026-11-30T02:00:00.123456+14:00" and a little room.
_MAX_LENGTH = 40


class InstantError(ValueError):
    """A text that is not an RFC 3339 instant with an offset; `without_offset` when it is one
    but for its missing offset."""

    def __init__(self, message: str, *, without_offset: bool = False) -> None:
        super().__init__(message)
        self.without_offset = without_offset


def format_instant(instant: datetime) -> str:
    """`instant` (aware) as `YYYY-MM-DDTHH:MM:SSZ` in UTC; naive is a programming error."""
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise InstantError(f"{instant.isoformat()!r} has no time zone (expected an aware instant)")
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_instant(text: object, *, field: str = "instant") -> datetime:
    """An RFC 3339 text (`…Z` or `…+01:00`) as an aware UTC datetime, or `InstantError` naming
    `field`, the value (shortened) and what was expected."""
    if not isinstance(text, str) or not 0 < len(text) <= _MAX_LENGTH:
        raise InstantError(
            f"{field}: {_shown(text)} is not an RFC 3339 instant "
            "(expected e.g. 2026-11-30T02:00:00Z)"
        )
    local, offset = _split_offset(text)
    if _RFC_3339.fullmatch(local) is not None and offset is None:
        raise InstantError(
            f"{field}: {text!r} has no offset (expected UTC with a Z, e.g. 2026-11-30T02:00:00Z)",
            without_offset=True,
        )
    candidate = text[:-1] + "+00:00" if text[-1:] in {"Z", "z"} else text
    try:
        if _RFC_3339.fullmatch(local) is None or offset is None:
            raise ValueError("not the RFC 3339 form")
        parsed = datetime.fromisoformat(candidate)
    except ValueError as exc:
        raise InstantError(
            f"{field}: {text!r} is not an RFC 3339 instant (expected e.g. 2026-11-30T02:00:00Z)"
        ) from exc
    try:
        return parsed.astimezone(UTC)
    except OverflowError as exc:
        # Year 1 at +14:00 is year 0 in UTC, 9999 at -14:00 is 10000: no instant holds either.
        raise InstantError(
            f"{field}: {text!r} is not an instant between the years 1 and 9999 in UTC (its "
            "offset carries it past them)"
        ) from exc


def _split_offset(text: str) -> tuple[str, str | None]:
    """(the local date and time, the offset `Z` or `±HH:MM` if the text ends with one)."""
    match = re.search(rf"{_OFFSET}\Z", text)
    if match is None:
        return text, None
    return text[: match.start()], match.group()


def parse_day_text(text: str) -> date:
    """`YYYY-MM-DD` as a date; `ValueError` for any other form or a day the calendar lacks."""
    if _DAY.fullmatch(text) is None:
        raise ValueError(f"{text[:40]!r} is not in the form YYYY-MM-DD")
    return date.fromisoformat(text)


def parse_written_time(text: str) -> datetime:
    """A date and time with an offset as a person writes it (`2026-12-01T04:00Z`, seconds
    optional, `T` or a space) as an aware UTC datetime; `ValueError` for any other form
    (`InstantError` with `without_offset` for that form without its offset)."""
    if _WRITTEN.fullmatch(text + "Z") is not None:
        raise InstantError(f"{text[:40]!r} has no offset", without_offset=True)
    if _WRITTEN.fullmatch(text) is None:
        raise ValueError(f"{text[:40]!r} is not in the form YYYY-MM-DDTHH:MM with Z or ±HH:MM")
    candidate = text[:-1] + "+00:00" if text[-1:] in {"Z", "z"} else text
    return datetime.fromisoformat(candidate).astimezone(UTC)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# RFC 9110's IMF-fixdate, the one form of `Date` a sender generates: `Mon, 30 Nov 2026 02:00:00
# GMT`. The obsolete forms (RFC 850, asctime) are not read: no agent writes them.
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_IMF_FIXDATE = re.compile(
    rf"({'|'.join(_WEEKDAYS)}), ([0-9]{{2}}) ({'|'.join(_MONTHS)}) ([0-9]{{4}}) "
    r"([0-9]{2}):([0-9]{2}):([0-9]{2}) GMT"
)


def format_http_date(instant: datetime) -> str:
    """`instant` (aware) as an IMF-fixdate, to the second: `Mon, 30 Nov 2026 02:00:00 GMT`."""
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError("format_http_date needs an aware datetime")
    return format_datetime(instant.astimezone(UTC).replace(microsecond=0), usegmt=True)


def parse_http_date(text: str | None) -> datetime | None:
    """An IMF-fixdate as an aware UTC datetime; None for anything else (absent, another form, a
    day that does not exist, a weekday that is not that day's, a year before 1970)."""
    if text is None or len(text) != 29:
        return None
    match = _IMF_FIXDATE.fullmatch(text)
    if match is None:
        return None
    weekday, day, month, year, hour, minute, second = match.groups()
    try:
        instant = datetime(
            int(year),
            _MONTHS.index(month) + 1,
            int(day),
            int(hour),
            int(minute),
            int(second),
            tzinfo=UTC,
        )
    except ValueError:
        return None
    if instant.year < 1970 or _WEEKDAYS[instant.weekday()] != weekday:
        return None
    return instant
