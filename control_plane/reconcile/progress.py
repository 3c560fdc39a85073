"""How far the worker has reconciled: windows closed up to `reconciled_until` are done.

A pass continues from there, so a worker that was down for a night (or a replica that takes over)
catches up on every window it did not see; the first pass ever looks back `FIRST_LOOKBACK`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from control_plane.types import Connection

__all__ = ["FIRST_LOOKBACK", "Progress", "read_progress", "record_pass"]

FIRST_LOOKBACK = timedelta(days=1)


@dataclass(frozen=True, kw_only=True)
class Progress:
    reconciled_until: datetime | None
    last_pass_at: datetime | None
    last_pass_by: str | None
    passes: int


def read_progress(conn: Connection) -> Progress:
    row = conn.execute(
        "SELECT reconciled_until, last_pass_at, last_pass_by, passes FROM reconcile_progress"
    ).fetchone()
    assert row is not None, "migration 0005 inserts the progress row"
    return Progress(**row)


def advance(conn: Connection, until: datetime) -> None:
    conn.execute(
        "UPDATE reconcile_progress SET reconciled_until = %s"
        " WHERE reconciled_until IS NULL OR reconciled_until < %s",
        [until, until],
    )


def record_pass(conn: Connection, *, at: datetime, by: str) -> None:
    conn.execute(
        "UPDATE reconcile_progress SET last_pass_at = %s, last_pass_by = %s, passes = passes + 1",
        [at, by],
    )
