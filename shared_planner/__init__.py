"""The pure core both programs share: time strings, wall clock -> instant, which slot is due.

No I/O and no clock reads: every function that needs the present takes it as an aware argument
(`now`, `after`, `start`/`end`), read once by the calling shell.
"""

from shared_planner.errors import (
    InvalidPlanningInput,
    InvalidSchedule,
    InvalidTimeZone,
    PlannerError,
)
from shared_planner.patterns import MAX_TIMES, TIME_PATTERN
from shared_planner.schedule import format_time, parse_times, schedule_error
from shared_planner.slots import (
    DEFAULT_CATCH_UP,
    MAX_CATCH_UP,
    PlannedSlot,
    Slot,
    due_slot,
    latest_closed_slot,
    next_slot,
    parse_slot_key,
    plan_slots,
    slot_for_key,
    slot_key,
    slots_between,
    slots_on_day,
)
from shared_planner.wall_clock import (
    WallTime,
    WallTimeKind,
    describe_wall_time,
    local_instant,
    resolve_wall_time,
    zone_of,
)

__all__ = [
    "DEFAULT_CATCH_UP",
    "MAX_CATCH_UP",
    "MAX_TIMES",
    "TIME_PATTERN",
    "InvalidPlanningInput",
    "InvalidSchedule",
    "InvalidTimeZone",
    "PlannedSlot",
    "PlannerError",
    "Slot",
    "WallTime",
    "WallTimeKind",
    "describe_wall_time",
    "due_slot",
    "format_time",
    "latest_closed_slot",
    "local_instant",
    "next_slot",
    "parse_slot_key",
    "parse_times",
    "plan_slots",
    "resolve_wall_time",
    "schedule_error",
    "slot_for_key",
    "slot_key",
    "slots_between",
    "slots_on_day",
    "zone_of",
]
