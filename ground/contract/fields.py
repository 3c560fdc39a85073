"""`Instant`: the field type of every instant in the contract's messages.

Parsed with an offset required, kept in UTC, and written back by `ground.instants.format_instant`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, PlainSerializer

from ground.instants import format_instant

__all__ = ["Instant"]


def _aware_utc(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("expected an instant with an offset, e.g. 2026-11-30T02:00:00Z")
    try:
        return value.astimezone(UTC)
    except OverflowError as exc:
        # Year 1 at +14:00 is year 0 in UTC, 9999 at -14:00 is 10000: no instant holds either.
        raise ValueError(
            "expected an instant between the years 1 and 9999 in UTC (its offset carries it "
            "past them)"
        ) from exc


Instant = Annotated[
    datetime,
    AfterValidator(_aware_utc),
    PlainSerializer(format_instant, return_type=str, when_used="json"),
]
