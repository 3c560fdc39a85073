"""The platform settings: one row every replica reads (DESIGN.md rules 2, 7 and 9).

The bounds and defaults are `ground.limits`, the numbers the agent enforces too."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from control_plane.errors import InvalidInput
from control_plane.types import Connection, Pool
from ground.limits import (
    DEFAULT_CATCH_UP_MINUTES,
    DEFAULT_GLOBAL_CAP,
    DEFAULT_ORG_CAP,
    DEFAULT_TIMEZONE,
    MAX_CAP,
    MAX_CATCH_UP_MINUTES,
    MIN_CAP,
    MIN_CATCH_UP_MINUTES,
)

__all__ = ["PlatformSettings", "SettingsService", "read_settings"]


@dataclass(frozen=True, kw_only=True)
class PlatformSettings:
    """Validated when built; every field error names the field, the value and the expectation."""

    timezone: str = DEFAULT_TIMEZONE
    catch_up_minutes: int = DEFAULT_CATCH_UP_MINUTES
    org_cap: int = DEFAULT_ORG_CAP
    global_cap: int = DEFAULT_GLOBAL_CAP

    def __post_init__(self) -> None:
        if not isinstance(self.timezone, str) or not _is_zone(self.timezone):
            raise InvalidInput(
                "timezone", self.timezone, "is not a known time zone (e.g. 'Europe/Amsterdam')"
            )
        _require_int(
            "catch_up_minutes", self.catch_up_minutes, MIN_CATCH_UP_MINUTES, MAX_CATCH_UP_MINUTES
        )
        _require_cap("org_cap", self.org_cap)
        _require_cap("global_cap", self.global_cap)

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def with_changes(self, changes: dict[str, Any]) -> PlatformSettings:
        known = {field.name for field in dataclasses.fields(self)}
        for name in changes:
            if name not in known:
                raise InvalidInput(
                    name, changes[name], f"is not a setting (known: {sorted(known)})"
                )
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """The four stored fields, as the settings row's columns."""
        return dataclasses.asdict(self)


def _is_zone(name: str) -> bool:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def _require_int(field: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(field, value, "is not a whole number")
    if not low <= value <= high:
        raise InvalidInput(field, value, f"is out of range (expected between {low} and {high})")


def _require_cap(field: str, value: object) -> None:
    # The upper bound is the column's range: past it the database would fail instead of refusing.
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(field, value, "is not a whole number")
    if value < MIN_CAP:
        raise InvalidInput(field, value, f"is out of range (expected at least {MIN_CAP})")
    if value > MAX_CAP:
        raise InvalidInput(field, value, f"is out of range (expected at most {MAX_CAP})")


class SettingsService:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def get(self) -> PlatformSettings:
        with self._pool.connection() as conn:
            return read_settings(conn)

    def update(self, changes: dict[str, Any]) -> PlatformSettings:
        """Apply `changes` (any subset of the fields), validated together, and return the result."""
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute(
                "SELECT timezone, catch_up_minutes, org_cap, global_cap"
                " FROM platform_settings FOR UPDATE"
            ).fetchone()
            assert row is not None, "migration 0003 inserts the settings row"
            updated = PlatformSettings(**row).with_changes(changes)
            conn.execute(
                "UPDATE platform_settings SET timezone = %(timezone)s,"
                " catch_up_minutes = %(catch_up_minutes)s, org_cap = %(org_cap)s,"
                " global_cap = %(global_cap)s, updated_at = now()",
                updated.as_dict(),
            )
        return updated


def read_settings(conn: Connection) -> PlatformSettings:
    row = conn.execute(
        "SELECT timezone, catch_up_minutes, org_cap, global_cap FROM platform_settings"
    ).fetchone()
    assert row is not None, "migration 0003 inserts the settings row"
    return PlatformSettings(**row)
