"""The times `agent status` shows, all in one zone — the platform's (the schedule's and the
panel's), UTC before the first sync — and always with it: `2026-11-30 03:00 CET`; and how long
ago or until, in words.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from shared_planner import resolve_wall_time

__all__ = ["ago", "days_until", "describe_slot", "until", "zoned"]


def ago(then: datetime, now: datetime) -> str:
    seconds = max(0, int((now - then).total_seconds()))
    if seconds < 120:
        return f"{seconds} seconds ago"
    if seconds < 2 * 3600:
        return f"{seconds // 60} minutes ago"
    if seconds < 2 * 86400:
        return f"{seconds // 3600} hours ago"
    return f"{seconds // 86400} days ago"


def zoned(at: datetime, tz: ZoneInfo | None) -> str:
    """An instant in the platform's zone, or UTC before the first sync — always with its zone
    (`2026-11-30 03:00 CET`), so no time of `status` is read in the wrong one."""
    return f"{at.astimezone(tz or UTC):%Y-%m-%d %H:%M %Z}"


def describe_slot(slot_key: str, tz: ZoneInfo | None) -> str:
    """A slot (`2026-11-30T03:00`, a wall time in the platform's zone) with its zone:
    `2026-11-30 03:00 CET`. Without the zone (no config cached) it is shown as it is written."""
    day, _, wall = slot_key.partition("T")
    if tz is None:
        return f"{day} {wall}"
    try:
        at = resolve_wall_time(date.fromisoformat(day), time.fromisoformat(wall), tz)
    except ValueError:
        return f"{day} {wall}"
    return zoned(at, tz)


def until(delta: timedelta) -> str:
    minutes = max(0, int(delta.total_seconds()) // 60)
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


def days_until(delta: timedelta) -> str:
    """A root's lifetime is months: `88 days`, and hours and minutes only in its last two days."""
    if delta >= timedelta(days=2):
        return f"{delta.days} days"
    return until(delta)
