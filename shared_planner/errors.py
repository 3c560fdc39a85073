"""What the planner refuses, as one small tree (each a `ValueError`: bad input, never a bug)::

    PlannerError                  anything handed to the planner that it cannot plan with
     ├── InvalidSchedule          a list of times breaks the schedule rules (names index and value)
     ├── InvalidTimeZone          a time zone name the zone database does not know
     └── InvalidPlanningInput     a naive datetime, a catch-up window out of range, a reversed range

Every message says which field, what was found and what was expected, so a shell can print it (or
an API return it in a 422) as it stands.
"""

from __future__ import annotations

import json

__all__ = [
    "InvalidPlanningInput",
    "InvalidSchedule",
    "InvalidTimeZone",
    "PlannerError",
    "describe_value",
]

# Long enough for any plausible mistake, short enough that a pasted blob cannot flood a log line.
_MAX_SHOWN = 40


def describe_value(value: object) -> str:
    """A short, readable rendering of a rejected value: strings quoted, JSON values as JSON (what
    an API client sent), anything else by its repr."""
    if isinstance(value, str):
        text = repr(value)
    else:
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):  # not JSON (a set, a circular list): its repr names it
            text = repr(value)
    if len(text) > _MAX_SHOWN:
        text = text[: _MAX_SHOWN - 1] + "…"
    return text


class PlannerError(ValueError):
    """Something handed to the planner cannot be planned with."""


class InvalidSchedule(PlannerError):
    """A list of schedule times breaks a rule.

    `index` is the offending entry's position (None when the list as a whole is wrong), `value` the
    entry (or the list), `problem` what is wrong with it and what is expected. `message(field)`
    renders the same text under another field name, e.g. `schedule.times[1]` for an API.
    """

    def __init__(
        self, *, index: int | None, value: object, problem: str, repeats: int | None = None
    ) -> None:
        self.index = index
        self.value = value
        self.problem = problem
        self.repeats = repeats  # the earlier index a duplicate repeats
        super().__init__(self.message())

    def location(self, field: str = "times") -> str:
        return field if self.index is None else f"{field}[{self.index}]"

    def message(self, field: str = "times") -> str:
        problem = self.problem
        if self.repeats is not None:
            problem = f"repeats {field}[{self.repeats}] (each time may appear once)"
        return f"{self.location(field)}: {describe_value(self.value)} {problem}"


class InvalidTimeZone(PlannerError):
    """A time zone name the zone database does not know."""

    def __init__(self, name: object, *, field: str = "tz") -> None:
        self.name = name
        super().__init__(
            f"{field}: {describe_value(name)} is not a known time zone "
            "(expected an IANA name such as 'Europe/Amsterdam')"
        )


class InvalidPlanningInput(PlannerError):
    """An argument to a planner function is out of range or of the wrong kind."""
