"""The one way an instant crosses the network: RFC 3339 in UTC with a `Z`, to the second.

`2026-11-30T02:00:00Z`. Standard library only: the release format and the planner's shells use
it as well as the contract. Every time the control plane sends (the server-time header, the config's
`server_time`, token expiries, run and event times) is written by `format_instant`, and every time
a program reads from the other is read by `parse_instant`, which accepts any RFC 3339 offset and
refuses a reading without one (a naive time means a different instant on every host).
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["InstantError", "format_instant", "parse_instant"]

# The longest RFC 3339 reading worth parsing: "2026-11-30T02:00:00.123456+14:00" and a little room.
_MAX_LENGTH = 40


class InstantError(ValueError):
    """A text that is not an RFC 3339 instant with an offset."""


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
    candidate = text[:-1] + "+00:00" if text[-1:] in {"Z", "z"} else text
    try:
        parsed = datetime.fromisoformat(candidate)
    except ValueError as exc:
        raise InstantError(
            f"{field}: {text!r} is not an RFC 3339 instant (expected e.g. 2026-11-30T02:00:00Z)"
        ) from exc
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise InstantError(
            f"{field}: {text!r} has no offset (expected UTC with a Z, e.g. 2026-11-30T02:00:00Z)"
        )
    return parsed.astimezone(UTC)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
