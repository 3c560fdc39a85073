"""The server's own check of a slot an agent names: recomputed with `shared_planner` from the
agent's stored schedule and the control plane's clock, never taken on the agent's word (an agent
host with a wrong clock must not update at 09:00)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from control_plane.errors import ClaimRefused
from ground.contract import RefusalCode, format_instant
from shared_planner import InvalidPlanningInput, PlannerError, Slot, parse_slot_key, slot_for_key

__all__ = ["agents_slot", "checked_slot", "checked_slot_of", "too_late_to_grant"]


def _not_a_slot(slot_key: object, why: str) -> ClaimRefused:
    return ClaimRefused(RefusalCode.NOT_A_SLOT, f"slot_key: {slot_key!r} {why}", slot_key=slot_key)


# A pure function of the schedule, the key and the zone, remembered: at 03:00 nearly the whole
# fleet asks with the same times and key, and walking the planner's calendar days per request was
# a third of a refusal's own CPU. A changed schedule or zone is another key: nothing goes stale.
@functools.lru_cache(maxsize=4096)
def _slot_for_key(times: tuple[str, ...], slot_key: str, timezone: str) -> Slot | None:
    return slot_for_key(times, slot_key, tz=timezone)


# A valid key, remembered as such: the fleet names the same few keys all night. Only a string
# that parsed is kept (`lru_cache` keeps no exception), so hostile keys cannot fill it and are
# judged afresh each time.
@functools.lru_cache(maxsize=1024)
def _valid_slot_key(slot_key: str) -> None:
    parse_slot_key(slot_key)


def agents_slot(slot: Slot, catch_up: timedelta, enrolled_at: datetime) -> bool:
    """Whether a slot of an agent's schedule is the agent's: one whose window closes after the
    agent was enrolled, a slot under way at enrollment included. The one rule of the claim
    (`checked_slot`), the missed pass (`reconcile.missed`) and the unreachable report
    (`runs.unreachable`): a slot the agent could claim is one it is held to, and one it did not
    take is missed; a slot whose window had closed before it was enrolled was never its own."""
    return slot.window_closes(catch_up) > enrolled_at


def checked_slot(
    slot_key: object,
    *,
    enabled: bool,
    times: Sequence[str],
    timezone: str,
    catch_up: timedelta,
    enrolled_at: datetime,
    now: datetime,
) -> Slot:
    """The agent's slot with this key whose window is open at `now`, or the refusal saying why."""
    try:
        if isinstance(slot_key, str):
            _valid_slot_key(slot_key)
        else:
            parse_slot_key(slot_key)
    except InvalidPlanningInput as exc:
        # The planner's message already names the field, the value and what was expected.
        raise ClaimRefused(RefusalCode.NOT_A_SLOT, str(exc), slot_key=slot_key) from exc
    if not enabled or not times:
        raise _not_a_slot(slot_key, "is not a slot: scheduled updates are off for this agent")
    try:
        slot = _slot_for_key(tuple(times), str(slot_key), timezone)
    except (PlannerError, OverflowError) as exc:
        # A date the planner cannot place is no slot; never a 500.
        raise _not_a_slot(slot_key, "is not a date the schedule can have a slot on") from exc
    if slot is None:
        raise _not_a_slot(slot_key, f"is not one of this agent's slots (times {list(times)})")
    if now < slot.at:
        raise _not_a_slot(slot_key, f"has not started yet (it opens at {format_instant(slot.at)})")
    closes = slot.window_closes(catch_up)
    if now >= closes:
        raise ClaimRefused(
            RefusalCode.WINDOW_CLOSED,
            f"slot_key: {slot_key!r} closed at {format_instant(closes)} "
            f"(catch-up window {int(catch_up.total_seconds() // 60)} minutes)",
            slot_key=slot_key,
        )
    if not agents_slot(slot, catch_up, enrolled_at):
        # Open at `now` yet closed at the enrollment: the enrolling replica's clock was ahead.
        raise _not_a_slot(
            slot_key,
            f"closed ({format_instant(closes)}) before the agent was enrolled "
            f"({format_instant(enrolled_at)}): it was never this agent's slot",
        )
    return slot


def too_late_to_grant(
    slot: Slot, slot_key: str, *, catch_up: timedelta, grant_margin: timedelta, now: datetime
) -> ClaimRefused | None:
    """`window_closed` for a new token asked in the last `grant_margin` of the slot's window, else
    None. The swap is refused once the window has closed (a 03:00 update never happens late), so
    a token granted in the last seconds buys a download that cannot finish in time: the run would
    end `failed`, alarming its customer and counting towards its release's halt. Refused like a
    closed window, it consumes the slot: the agent stops asking, and the miss keeps its reason."""
    closes = slot.window_closes(catch_up)
    if now < closes - grant_margin:
        return None
    return ClaimRefused(
        RefusalCode.WINDOW_CLOSED,
        f"slot_key: the window of slot {slot_key!r} closes at {format_instant(closes)}; "
        f"no token is granted in its last {int(grant_margin.total_seconds())} s",
        slot_key=slot_key,
    )


def checked_slot_of(row: Mapping[str, Any], slot_key: object, now: datetime) -> Slot:
    """`checked_slot` for an agent row read with its schedule and the platform's settings
    (`enabled`, `times`, `timezone`, `catch_up_minutes`, `enrolled_at`): the claim and the
    nothing-to-do report check a slot the same way."""
    return checked_slot(
        slot_key,
        enabled=row["enabled"],
        times=row["times"],
        timezone=row["timezone"],
        catch_up=timedelta(minutes=row["catch_up_minutes"]),
        enrolled_at=row["enrolled_at"],
        now=now,
    )
