"""The rows of agents grouped by schedule, each with the slot its schedule asks at."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime

from psycopg.rows import DictRow

__all__ = ["SlotOf", "with_slots"]

# An agent's schedule → the slot it asks at in the span looked at (None: none there).
SlotOf = Callable[[tuple[str, ...]], datetime | None]


def with_slots(rows: Iterable[DictRow], slot_of: SlotOf) -> Iterator[tuple[DictRow, datetime]]:
    """Each row with the slot of its schedule (`times`, as its JSON text); a row whose schedule
    has no slot there is left out. Most agents share a few schedules: each schedule is parsed
    and its slot planned once, not per row (the text is the key)."""
    slot_per_schedule: dict[str, datetime | None] = {}
    for row in rows:
        text = row["times"]
        if text not in slot_per_schedule:
            slot_per_schedule[text] = slot_of(tuple(json.loads(text)))
        slot_at = slot_per_schedule[text]
        if slot_at is not None:
            yield row, slot_at
