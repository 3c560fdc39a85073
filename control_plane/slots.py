"""The server's own check of a slot an agent names (DESIGN.md rule 8, "Plans on the control
plane's clock"): recomputed with `shared_planner` from the agent's stored schedule and the
control plane's clock, never taken on the agent's word."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta

from control_plane.errors import ClaimRefused
from shared_planner import PlannerError, Slot, slots_between

__all__ = ["checked_slot", "retry_after_seconds", "round_start"]

_SLOT_KEY = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})")


def _not_a_slot(slot_key: object, why: str) -> ClaimRefused:
    return ClaimRefused(422, "not_a_slot", f"slot_key: {slot_key!r} {why}", slot_key=slot_key)


def checked_slot(
    slot_key: object,
    *,
    enabled: bool,
    times: list[str],
    timezone: str,
    catch_up: timedelta,
    now: datetime,
) -> Slot:
    """The agent's slot with this key whose window is open at `now`, or the refusal saying why."""
    match = _SLOT_KEY.fullmatch(slot_key) if isinstance(slot_key, str) else None
    if match is None:
        raise _not_a_slot(slot_key, "is not a slot key (expected YYYY-MM-DDTHH:MM)")
    try:
        day = date(int(match[1]), int(match[2]), int(match[3]))
        time(int(match[4]), int(match[5]))
    except ValueError as exc:
        raise _not_a_slot(slot_key, "is not a real date and time") from exc
    if not enabled or not times:
        raise _not_a_slot(slot_key, "is not a slot: scheduled updates are off for this agent")
    try:
        # The slot of a local date lies within a day of that date's UTC midnight in any zone.
        start = datetime.combine(day - timedelta(days=2), time(), tzinfo=UTC)
        candidates = slots_between(times, start=start, end=start + timedelta(days=5), tz=timezone)
    except (PlannerError, OverflowError) as exc:
        # A date the planner cannot place (e.g. year 0001) is no slot; never a 500.
        raise _not_a_slot(slot_key, "is not a date the schedule can have a slot on") from exc
    slot = next((candidate for candidate in candidates if candidate.key == slot_key), None)
    if slot is None:
        raise _not_a_slot(slot_key, f"is not one of this agent's slots (times {times})")
    if now < slot.at:
        raise _not_a_slot(slot_key, f"has not started yet (it opens at {slot.at.isoformat()})")
    if now >= slot.at + catch_up:
        raise ClaimRefused(
            409,
            "window_closed",
            f"slot_key: {slot_key!r} closed at {(slot.at + catch_up).isoformat()} "
            f"(catch-up window {int(catch_up.total_seconds() // 60)} minutes)",
            slot_key=slot_key,
        )
    return slot


def round_start(now: datetime) -> datetime:
    """A round is one minute of the control plane's clock."""
    return now.astimezone(UTC).replace(second=0, microsecond=0)


def retry_after_seconds(now: datetime) -> int:
    """Whole seconds until the next round begins (at least 1)."""
    remaining = (round_start(now) + timedelta(minutes=1) - now).total_seconds()
    return max(1, int(-(-remaining // 1)))
