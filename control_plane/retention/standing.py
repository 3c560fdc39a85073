"""Where retention stands, for /metrics: one row, read the same on day 1 and day 365."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from control_plane.retention.data import COUNTERS
from control_plane.seeded_rows import seeded_row
from control_plane.types import Connection

__all__ = ["RetentionStanding", "read_standing"]


@dataclass(frozen=True, kw_only=True)
class RetentionStanding:
    last_completed_at: datetime | None
    walks_completed: int
    # Rows removed since the control plane was installed, by table (they only grow).
    removed: dict[str, int]


def read_standing(conn: Connection) -> RetentionStanding:
    row = seeded_row(
        conn,
        "SELECT last_completed_at, walks_completed, runs_removed, events_removed,"
        " notifications_removed, refusals_removed, reviews_removed, rounds_removed,"
        " unreachable_reports_removed, sign_in_failures_removed"
        " FROM retention_progress",
    )
    return RetentionStanding(
        last_completed_at=row["last_completed_at"],
        walks_completed=row["walks_completed"],
        removed={table: row[column] for table, column in COUNTERS.items()},
    )
