"""The one definition of a schedule time, used by the planner, the API validator and the database."""

# HH:MM, 00:00-23:55, minutes on the five-minute grid. Anchored; plain enough for both Python's `re`
# and PostgreSQL's jsonpath `like_regex` (which has no \d), so one string serves every layer.
TIME_PATTERN = "^([01][0-9]|2[0-3]):[0-5][05]$"

# A day holds 24 * 12 grid points, so no valid schedule has more times than this.
MAX_TIMES = 288
