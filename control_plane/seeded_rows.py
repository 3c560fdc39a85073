"""Tables of one row, inserted by the migration that makes them and then only read and updated:
the platform's settings, the brake, the rollout's settings, the progress of reconcile and of
retention.

Below every domain (it reads one row and imports nothing of theirs).
"""

from __future__ import annotations

from psycopg.rows import DictRow

from control_plane.types import Connection

__all__ = ["seeded_row"]


def seeded_row(conn: Connection, statement: str) -> DictRow:
    """The one row `statement` reads from a table its migration seeded. There is always one: its
    absence is a database that was never migrated, not a state to handle."""
    row = conn.execute(statement).fetchone()
    assert row is not None, f"the migrations insert the row this reads: {statement}"
    return row
