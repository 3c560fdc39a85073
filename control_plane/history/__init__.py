"""An organisation's history as its customers read it: runs and events a page at a time, back to
the retention limit; the same streamed for an export; and the agents per version, night by night.

    pages     `HistoryService`: pages of runs or events by (time, id), newest first (`HistoryQuery`,
              `Position`, `HistoryPage`); an export's rows in a date range, read through a
              server-side cursor; the versions per night
    data      the SQL of those reads, each bounded by an index and a page or a range

Every read is one organisation's (its agents' only: another organisation's agent is not found).
Runs are kept `retention_days`; events without a run (the trail of what people did) are kept.
"""

from __future__ import annotations

# The package's names are its pages' names, listed once there.
from control_plane.history.pages import *  # noqa: F403
from control_plane.history.pages import __all__ as __all__
