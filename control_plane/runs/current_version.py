"""What an agent runs: `agents.current_version`, moved by a report only when it is news.

Each report that names a version (an "already up to date", an outcome) sets it, unless a newer
run already reported: a run's report can arrive late (an agent that was offline sends an older
outcome after a newer run's), and the version a host actually runs is the one its newest run
named. "Newer" is the run's `created_at`, stored beside the version
(`agents.current_version_run_at`); a version stored before that column existed, or by a replica
of an earlier release, has none and is moved by any report.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from control_plane.types import Connection

__all__ = ["report_version"]


def report_version(
    conn: Connection, agent_id: UUID, version: str, run_created_at: datetime
) -> None:
    """The run created at `run_created_at` reported the agent running `version`."""
    conn.execute(
        "UPDATE agents SET current_version = %(version)s, current_version_run_at = %(at)s"
        " WHERE id = %(agent)s"
        " AND (current_version_run_at IS NULL OR current_version_run_at <= %(at)s)",
        {"version": version, "at": run_created_at, "agent": agent_id},
    )
