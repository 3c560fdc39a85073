"""The history's SQL: a page of runs or events by (time, id), an export's rows, the versions per
night.

A page is read through an index whose order is the page's: runs by (org_id, created_at, id) or
(agent_id, created_at), events by (org_id, at, id) or (agent_id, at, id). Only the conditions a
query names are written into its statement: a condition written as `(%s IS NULL OR …)` makes one
generic plan that can use no index.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from control_plane.runs.views import RUN_COLUMNS

__all__ = ["Direction", "Table", "page_statement", "versions_per_night_statement"]

Table = Literal["runs", "events"]
# "older": the rows before a position, newest first; "newer": the rows after one, oldest first.
Direction = Literal["older", "newer"]

_SELECT = {
    "runs": (
        f"SELECT {RUN_COLUMNS}, a.name AS agent_name FROM runs r"  # noqa: S608 - constant columns
        " JOIN agents a ON a.id = r.agent_id LEFT JOIN releases rel ON rel.id = r.release_id"
    ),
    "events": (
        "SELECT r.id, r.kind, r.actor_kind, r.actor_id, r.actor_name, r.run_id, r.at, r.data,"
        " r.agent_id, a.name AS agent_name FROM events r LEFT JOIN agents a ON a.id = r.agent_id"
    ),
}
# Each table's time: a run's is when its row was made (a scheduled run's claim or its miss).
TIME = {"runs": "r.created_at", "events": "r.at"}


def page_statement(
    table: Table,
    *,
    org_id: UUID,
    agent_id: UUID | None,
    since: datetime | None,
    until: datetime | None,
    position: tuple[datetime, UUID | int] | None,
    direction: Direction,
    limit: int | None,
) -> tuple[str, dict[str, Any]]:
    """The statement for up to `limit` rows (all of them: None) beyond `position`, and its
    values."""
    time = TIME[table]
    conditions = ["r.org_id = %(org_id)s"]
    if agent_id is not None:
        conditions.append("r.agent_id = %(agent_id)s")
    if since is not None:
        conditions.append(f"{time} >= %(since)s")
    if until is not None:
        conditions.append(f"{time} < %(until)s")
    if position is not None:
        compare = "<" if direction == "older" else ">"
        conditions.append(f"({time}, r.id) {compare} (%(at)s, %(id)s)")
    order = "DESC" if direction == "older" else "ASC"
    statement = (
        f"{_SELECT[table]} WHERE {' AND '.join(conditions)} ORDER BY {time} {order}, r.id {order}"
    )
    if limit is not None:
        statement += " LIMIT %(limit)s"
    values: dict[str, Any] = {
        "org_id": org_id,
        "agent_id": agent_id,
        "since": since,
        "until": until,
        "at": position[0] if position else None,
        "id": position[1] if position else None,
        "limit": limit,
    }
    return statement, values


# Per agent and night (the local day its run's time falls on), the version of its last run that
# reported one; then how many agents ran each version that night. The runs that reported none
# are ordered after the others rather than filtered out, so the range is read from the index
# with no condition left to check row by row.
VERSIONS_PER_NIGHT = """
SELECT night, version, count(*) AS agents FROM (
    SELECT DISTINCT ON (r.agent_id, night)
           (r.created_at AT TIME ZONE %(zone)s)::date AS night, r.version
      FROM runs r
     WHERE r.org_id = %(org_id)s AND r.created_at >= %(since)s AND r.created_at < %(until)s
     ORDER BY r.agent_id, night, r.version IS NULL, r.created_at DESC, r.id DESC
) AS last_of_night
WHERE version IS NOT NULL
GROUP BY night, version
ORDER BY night, version
"""


def versions_per_night_statement() -> str:
    return VERSIONS_PER_NIGHT
