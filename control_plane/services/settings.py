"""The platform settings: one row every replica reads (DESIGN.md rules 2, 7 and 9)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from control_plane.errors import InvalidInput
from control_plane.types import Connection, Pool

__all__ = ["MAX_CATCH_UP_MINUTES", "PlatformSettings", "SettingsService"]

MAX_CATCH_UP_MINUTES = 120


@dataclass(frozen=True, kw_only=True)
class PlatformSettings:
    """Validated when built; every field error names the field, the value and the expectation."""

    timezone: str = "Europe/Amsterdam"
    catch_up_minutes: int = 15
    org_cap: int = 5
    global_cap: int = 25

    def __post_init__(self) -> None:
        if not isinstance(self.timezone, str) or not _is_zone(self.timezone):
            raise InvalidInput(
                "timezone", self.timezone, "is not a known time zone (e.g. 'Europe/Amsterdam')"
            )
        _require_int("catch_up_minutes", self.catch_up_minutes, 1, MAX_CATCH_UP_MINUTES)
        _require_int("org_cap", self.org_cap, 0, None)
        _require_int("global_cap", self.global_cap, 0, None)

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
        return dataclasses.asdict(self)


def _is_zone(name: str) -> bool:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def _require_int(field: str, value: object, low: int, high: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(field, value, "is not a whole number")
    if value < low or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise InvalidInput(field, value, f"is out of range (expected {bounds})")


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
