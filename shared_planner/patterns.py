"""The one definition of a schedule time: used by the planner, the API validator, the database.

The numbers are the contract's (`ground.limits`); this module adds the compiled forms.
"""

import re

from ground.limits import GRID_MINUTES, MAX_TIMES, TIME_PATTERN

__all__ = ["CLOCK_TIME_RE", "GRID_MINUTES", "MAX_TIMES", "TIME_PATTERN", "TIME_RE"]

# Python's `$` also matches before a trailing newline, so the pattern is only ever applied with
# `fullmatch`, which "03:00\n" cannot pass (PostgreSQL's `$` has no such exception).
TIME_RE = re.compile(TIME_PATTERN)

# Any 24-hour HH:MM, on the grid or not; only used to tell "off the grid" from "not a time at all"
# in a message. Acceptance is always decided by TIME_PATTERN.
CLOCK_TIME_RE = re.compile(r"([01][0-9]|2[0-3]):[0-5][0-9]")
