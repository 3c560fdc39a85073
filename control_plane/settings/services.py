"""The platform settings: one row every replica reads.

The bounds and defaults are `ground.limits`, the numbers the agent enforces too; the history's
retention is the control plane's alone, so its bounds live here."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import TypeAdapter, ValidationError

from control_plane.errors import InvalidInput
from control_plane.events.trail import Actor, record_action
from control_plane.seeded_rows import seeded_row
from control_plane.types import Connection, Pool
from ground.contract.messages import ZoneName
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

__all__ = [
    "DEFAULT_GRANT_MARGIN_SECONDS",
    "DEFAULT_RETENTION_DAYS",
    "MAX_RETENTION_DAYS",
    "MIN_RETENTION_DAYS",
    "PlatformSettings",
    "SettingsService",
    "read_settings",
]

# No new throttle token in the window's last minute (one round): the swap is refused once the
# window has closed, so a download started later than this rarely finishes in time and its run
# would end `failed`. 0 grants until the close.
DEFAULT_GRANT_MARGIN_SECONDS = 60

# How long runs, their events and notifications are kept. 400 days: "the same night last year"
# stays comparable, with a month to spare for a yearly review that happens late.
DEFAULT_RETENTION_DAYS = 400
# Below a month the product would forget what it still reads back: the rollout's soak and
# evidence, the three days of silence behind a "stale" notice, a customer's monthly review.
MIN_RETENTION_DAYS = 30
# Ten years: past that the setting is a typo (days taken for hours, or a year count), not a policy.
MAX_RETENTION_DAYS = 3650


@dataclass(frozen=True, kw_only=True)
class PlatformSettings:
    """Validated when built; every field error names the field, the value and the expectation."""

    timezone: str = DEFAULT_TIMEZONE
    catch_up_minutes: int = DEFAULT_CATCH_UP_MINUTES
    grant_margin_seconds: int = DEFAULT_GRANT_MARGIN_SECONDS
    org_cap: int = DEFAULT_ORG_CAP
    global_cap: int = DEFAULT_GLOBAL_CAP
    retention_days: int = DEFAULT_RETENTION_DAYS

    def __post_init__(self) -> None:
        if not isinstance(self.timezone, str) or not _is_zone(self.timezone):
            raise InvalidInput(
                "timezone", self.timezone, "is not a known time zone (e.g. 'Europe/Amsterdam')"
            )
        _require_int(
            "catch_up_minutes", self.catch_up_minutes, MIN_CATCH_UP_MINUTES, MAX_CATCH_UP_MINUTES
        )
        _require_grant_margin(self.grant_margin_seconds, self.catch_up_minutes)
        _require_cap("org_cap", self.org_cap)
        _require_cap("global_cap", self.global_cap)
        _require_int("retention_days", self.retention_days, MIN_RETENTION_DAYS, MAX_RETENTION_DAYS)
        if self.org_cap > self.global_cap:
            # Refused rather than warned: such an org cap can never be reached, and a number
            # that does nothing misleads whoever reads the settings.
            raise InvalidInput(
                "org_cap",
                self.org_cap,
                f"is above global_cap ({self.global_cap}): an organisation cannot get more than "
                "the platform's total (lower org_cap or raise global_cap in the same request)",
            )

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def grant_rounds(self) -> int:
        """The rounds of a slot's window in which a new token can still be granted: those that
        begin before its grant margin (a slot begins with a round). The caps serve at most this
        many rounds' worth of a slot's agents."""
        return self.catch_up_minutes - self.grant_margin_seconds // 60

    def with_changes(self, changes: dict[str, Any]) -> PlatformSettings:
        known = {field.name for field in dataclasses.fields(self)}
        for name in changes:
            if name not in known:
                raise InvalidInput(
                    name, changes[name], f"is not a setting (known: {sorted(known)})"
                )
        try:
            return dataclasses.replace(self, **changes)
        except InvalidInput as refused:
            if refused.fields.get("field") == "org_cap" and set(changes) == {"global_cap"}:
                # Only the global cap was asked to change: name the value the caller sent.
                raise InvalidInput(
                    "global_cap",
                    changes["global_cap"],
                    f"is below org_cap ({self.org_cap}): lower org_cap first, or both at once",
                ) from refused
            if (
                refused.fields.get("field") == "grant_margin_seconds"
                and "grant_margin_seconds" not in changes
                and "catch_up_minutes" in changes
            ):
                # The window was asked to change, the margin was not: name the value the caller
                # sent (the operators' page has no margin field to point at).
                raise InvalidInput(
                    "catch_up_minutes",
                    changes["catch_up_minutes"],
                    f"leaves no time before grant_margin_seconds ({self.grant_margin_seconds})"
                    " when the window closes: lower grant_margin_seconds first, or both at once",
                ) from refused
            raise

    def as_dict(self) -> dict[str, Any]:
        """The stored fields, as the settings row's columns."""
        return dataclasses.asdict(self)


_ZONE_NAME: TypeAdapter[str] = TypeAdapter(ZoneName)


def _is_zone(name: str) -> bool:
    # The contract's rule: an IANA name, never a host alias such as `localtime` whose meaning
    # depends on the machine that reads it.
    try:
        _ZONE_NAME.validate_python(name, strict=True)
    except ValidationError:
        return False
    return True


def _require_int(field: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(field, value, "is not a whole number")
    if not low <= value <= high:
        raise InvalidInput(field, value, f"is out of range (expected between {low} and {high})")


def _require_grant_margin(value: object, catch_up_minutes: int) -> None:
    # Less than the window: a margin as long as the window would never grant a token, which is
    # the brake's job (it carries a reason and shows it to every agent).
    window_seconds = catch_up_minutes * 60
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput("grant_margin_seconds", value, "is not a whole number")
    if not 0 <= value < window_seconds:
        raise InvalidInput(
            "grant_margin_seconds",
            value,
            f"is out of range (expected between 0 and {window_seconds - 1}: less than the"
            f" {catch_up_minutes}-minute catch-up window)",
        )


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

    def update(
        self,
        changes: dict[str, Any],
        *,
        now: datetime | None = None,
        actor: Actor | None = None,
    ) -> PlatformSettings:
        """Apply `changes` (any subset of the fields), validated together, and return the result.
        A change that changes something is on the trail (`settings.changed`) with its actor."""
        with self._pool.connection() as conn, conn.transaction():
            row = seeded_row(
                conn,
                "SELECT timezone, catch_up_minutes, grant_margin_seconds, org_cap, global_cap,"
                " retention_days, now() AS db_now"
                " FROM platform_settings FOR UPDATE",
            )
            at = now or row.pop("db_now")
            row.pop("db_now", None)
            current = PlatformSettings(**row)
            updated = current.with_changes(changes)
            conn.execute(
                "UPDATE platform_settings SET timezone = %(timezone)s,"
                " catch_up_minutes = %(catch_up_minutes)s,"
                " grant_margin_seconds = %(grant_margin_seconds)s, org_cap = %(org_cap)s,"
                " global_cap = %(global_cap)s, retention_days = %(retention_days)s,"
                " updated_at = now()",
                updated.as_dict(),
            )
            before, after = current.as_dict(), updated.as_dict()
            changed = sorted(name for name in after if before[name] != after[name])
            if changed:
                record_action(
                    conn,
                    kind="settings.changed",
                    actor=actor or Actor(kind="operator"),
                    at=at,
                    data={
                        "before": {name: before[name] for name in changed},
                        "after": {name: after[name] for name in changed},
                    },
                )
        return updated


def read_settings(conn: Connection) -> PlatformSettings:
    row = seeded_row(
        conn,
        "SELECT timezone, catch_up_minutes, grant_margin_seconds, org_cap, global_cap,"
        " retention_days FROM platform_settings",
    )
    return PlatformSettings(**row)
