"""Limits that more than one program enforces, each defined once.

The API validator, the database CHECK constraints, the agent's parser and the planner all import
these; none writes its own number. A limit here is part of the contract: changing it changes what
every program accepts.
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = [
    "DEFAULT_CATCH_UP_MINUTES",
    "DEFAULT_CHANNEL",
    "DEFAULT_GLOBAL_CAP",
    "DEFAULT_ORG_CAP",
    "DEFAULT_PLATFORM",
    "DEFAULT_TIMES",
    "DEFAULT_TIMEZONE",
    "FIRST_YEAR",
    "GRID_MINUTES",
    "LAST_YEAR",
    "MAX_CAP",
    "MAX_CATCH_UP_MINUTES",
    "MAX_HOST_CLOCK_OFFSET_SECONDS",
    "MAX_TIMES",
    "MAX_UNREACHABLE_ERROR_LENGTH",
    "MAX_UNREACHABLE_REPORT_AGE_DAYS",
    "MAX_VERSION_LENGTH",
    "MIN_CAP",
    "MIN_CATCH_UP_MINUTES",
    "PRODUCTS",
    "RELEASE_NAME_PATTERN",
    "TIME_PATTERN",
    "Product",
]

# HH:MM, 00:00-23:55, minutes on the five-minute grid. Anchored; plain enough for both Python's `re`
# and PostgreSQL's jsonpath `like_regex` (which has no \d), so one string serves every layer.
TIME_PATTERN = "^([01][0-9]|2[0-3]):[0-5][05]$"

# Minutes between two neighbouring grid points.
GRID_MINUTES = 5

# A day holds 24 * 12 grid points, so no valid schedule has more times than this.
MAX_TIMES = 24 * 60 // GRID_MINUTES

# On for everyone: the column default of every agent's schedule, so no agent is left out.
DEFAULT_TIMES = ("03:00",)

# The platform's one zone, a setting: schedules are wall-clock times there, never UTC, so a
# slot the panel shows as 03:00 does not move by an hour in summer.
DEFAULT_TIMEZONE = "Europe/Amsterdam"

# The years the planner answers for, and so any clock the programs run on. Beyond them the walk
# over neighbouring dates would leave the calendar Python's datetime can hold.
FIRST_YEAR, LAST_YEAR = 1900, 8999

# The catch-up window: a promise about interruption, not completeness. The upper bound keeps a
# 03:00 update out of the working day whatever an operator sets: two hours, so a 03:00 slot never
# starts after 05:00.
DEFAULT_CATCH_UP_MINUTES = 15
MIN_CATCH_UP_MINUTES = 1
MAX_CATCH_UP_MINUTES = 120

# The caps: tokens per round (one minute of the control plane's clock). The upper bound is
# the database column's range (`integer`), so a larger number is a readable 422, never a 500. The
# lower bound is 1: a cap of 0 halts every update without saying why, which is the brake's job
# (it carries a reason and shows it to every agent).
DEFAULT_ORG_CAP = 5
DEFAULT_GLOBAL_CAP = 25
MIN_CAP = 1
MAX_CAP = 2**31 - 1

# An agent version string as it crosses the network (a run row's column holds no more).
MAX_VERSION_LENGTH = 100

# A release's channel and platform (the manifest's names, what an agent follows): lower-case
# letters, digits, `_` and `-`, 1-63 long. Anchored and plain, for Python's `re`, pydantic and a
# PostgreSQL CHECK alike.
RELEASE_NAME_PATTERN = "^[a-z0-9][a-z0-9_-]{0,62}$"

# The pair an agent follows when it does not say (an agent older than channels): the one track
# there was before them.
DEFAULT_CHANNEL = "stable"
DEFAULT_PLATFORM = "linux-x86_64"

# The two programs a release can be: the managed agent, or nachtwacht's own agent (the updater).
# The default first: a manifest or a request that does not name its product means the agent.
Product = Literal["agent", "updater"]
PRODUCTS: Final[tuple[Product, ...]] = ("agent", "updater")

# How far a host's clock may be from the control plane's and the agent still plans on the control
# plane's clock: it learns the difference from every answer and follows it up to this bound, never
# further (the control plane is trusted with the schedule, not with moving the host's time at
# will). A hardware clock that keeps local time in the wrong zone is off by up to 14 hours, and
# drift adds minutes. Beyond the bound the agent plans on a clock that is wrong by the rest, asks
# for another day's slot, and misses its own: the control plane records such a miss as
# `host_clock`. Network delay (seconds) and the drift of a clock without time synchronisation (a
# few seconds a day) are far below it, so neither is ever taken for a wrong clock.
MAX_HOST_CLOCK_OFFSET_SECONDS = 24 * 60 * 60

# What an agent that could not reach the control plane through a slot's window says of it once it
# reaches it again (`UnreachableReport`): the first error's text, at most this long (the agent
# shortens a longer one; the control plane refuses it), and only for a slot at most this many days
# old (the agent forgets older ones; the control plane refuses them): the reason of an older
# miss is history the customer has read already.
MAX_UNREACHABLE_ERROR_LENGTH = 500
MAX_UNREACHABLE_REPORT_AGE_DAYS = 7
