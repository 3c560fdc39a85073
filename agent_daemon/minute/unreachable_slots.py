"""The slots whose window the agent was inside while it could not reach the control plane, and
the report of each once it can (`UnreachableReport`, contract 7).

A minute whose reach or claim found nothing answering — no connection, DNS, TLS, a timeout, or a
proxy's or load balancer's answer that is not the control plane's (`Unreachable` with `platform`
false) — while a slot of the schedule it last knew (the cached config) was due, notes that slot in
a file of its own beside the daemon's state (`disk.unreachable_file`): the first error's text,
the first and the last try, how many. A 5xx in the contract's words (`database_unavailable`) is
not this: the control plane answered, and its miss is `platform_unavailable` already. A minute
that carries a granted claim on is not either: the claim holds the slot.

Once the control plane answers again and says it speaks contract 7, each noted slot becomes one
report in the outbox (`reporting`), which delivers it as it delivers every report (in order,
again after a crash; a refusal is set aside), and is taken out of the file. A control plane
of an older contract would answer the path 404: nothing is sent to it, and the slots wait until
they are older than `MAX_UNREACHABLE_REPORT_AGE_DAYS` (the control plane refuses older ones).

Pure: the daemon reads the file, calls these and saves what they return.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from agent_daemon.disk.unreachable_file import UnreachableSlot, UnreachableSlots
from ground.contract import UnreachableReport
from ground.contract.plain_text import clipped, shown
from ground.limits import MAX_UNREACHABLE_ERROR_LENGTH, MAX_UNREACHABLE_REPORT_AGE_DAYS
from shared_planner import Slot

__all__ = [
    "KEEP_UNREACHABLE_SLOTS",
    "UNREACHABLE_CONTRACT",
    "note_unreachable",
    "report_of",
    "still_reportable",
]

# The contract version from which a control plane takes `UnreachableReport`.
UNREACHABLE_CONTRACT = 7
# At most this many slots are kept (the newest): a week of a schedule of a few times a day.
KEEP_UNREACHABLE_SLOTS = 50
MAX_AGE = timedelta(days=MAX_UNREACHABLE_REPORT_AGE_DAYS)


def plain_error(error: str) -> str:
    """`error` as the contract takes it: control characters shown as U+FFFD, at most
    `MAX_UNREACHABLE_ERROR_LENGTH` characters (a longer one ends with an ellipsis)."""
    return clipped(shown(error).strip() or "no answer", MAX_UNREACHABLE_ERROR_LENGTH)


def note_unreachable(
    noted_so_far: UnreachableSlots, slot: Slot, error: str, now: datetime
) -> tuple[UnreachableSlots, bool]:
    """The slots with this minute's try of `slot` noted, and whether it is the slot's first."""
    kept = still_reportable(noted_so_far, now)
    for index, noted in enumerate(kept):
        if noted.slot_key == slot.key:
            tried = noted.model_copy(
                update={
                    "last_tried_at": max(now, noted.first_tried_at),
                    "attempts": noted.attempts + 1,
                }
            )
            slots = (*kept[:index], tried, *kept[index + 1 :])
            return UnreachableSlots(slots=slots), False
    first = UnreachableSlot(
        slot_key=slot.key,
        slot_at=slot.at,
        error=plain_error(error),
        first_tried_at=now,
        last_tried_at=now,
    )
    slots = (*kept, first)[-KEEP_UNREACHABLE_SLOTS:]
    return UnreachableSlots(slots=slots), True


def still_reportable(noted: UnreachableSlots, now: datetime) -> tuple[UnreachableSlot, ...]:
    """The noted slots the control plane would still take (not older than the bound)."""
    return tuple(s for s in noted.slots if s.slot_at >= now - MAX_AGE)


def report_of(noted: UnreachableSlot) -> UnreachableReport:
    return UnreachableReport(
        slot_key=noted.slot_key,
        error=plain_error(noted.error),
        first_tried_at=noted.first_tried_at,
        last_tried_at=max(noted.last_tried_at, noted.first_tried_at),
        attempts=max(1, min(noted.attempts, 100_000)),
    )
