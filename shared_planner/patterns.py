"""The one definition of a schedule time: used by the planner, the API validator, the database."""

import re

# HH:MM, 00:00-23:55, minutes on the five-minute grid. Anchored; plain enough for both Python's `re`
# and PostgreSQL's jsonpath `like_regex` (which has no \d), so one string serves every layer.
TIME_PATTERN = "^([01][0-9]|2[0-3]):[0-5][05]$"

# A day holds 24 * 12 grid points, so no valid schedule has more times than this.
MAX_TIMES = 288

# Minutes between two neighbouring grid points.
GRID_MINUTES = 5

# Python's `$` also matches before a trailing newline, so the pattern is only ever applied with
# `fullmatch`, which "03:00\n" cannot pass (PostgreSQL's `$` has no such exception).
TIME_RE = re.compile(TIME_PATTERN)

# Any 24-hour HH:MM, on the grid or not; only used to tell "off the grid" from "not a time at all"
# in a message. Acceptance is always decided by TIME_PATTERN.
CLOCK_TIME_RE = re.compile(r"([01][0-9]|2[0-3]):[0-5][0-9]")
