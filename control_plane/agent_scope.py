"""Whether an agent is within an organisation's reach, and whether an organisation exists: the
checks every organisation-scoped read and write makes first.

Below every domain (it reads one table and raises one error), so the domains that take an agent
or organisation id — accounts, agents, enrollment, events, runs, pins, rollout — ask it without
importing each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from control_plane.errors import NotFound
from control_plane.types import Connection
from ground.contract import AnswerCode

__all__ = [
    "agent_not_found",
    "org_not_found",
    "require_agent",
    "require_agents",
    "require_org",
]


def agent_not_found(agent_id: UUID) -> NotFound:
    # Another organisation's agent is reported exactly like one that does not exist.
    return NotFound(
        f"agent {agent_id} does not exist in this organisation", code=AnswerCode.AGENT_NOT_FOUND
    )


def require_agent(conn: Connection, org_id: UUID, agent_id: UUID) -> None:
    """Raise `agent_not_found` unless the agent belongs to the organisation."""
    found = conn.execute(
        "SELECT 1 FROM agents WHERE id = %s AND org_id = %s AND deleted_at IS NULL",
        [agent_id, org_id],
    ).fetchone()
    if found is None:
        raise agent_not_found(agent_id)


def require_agents(
    conn: Connection, org_id: UUID, agent_ids: Sequence[UUID], *, lock: bool = False
) -> list[UUID]:
    """The ids, each once, in id order; the first, in that order, that is not a live agent of the
    organisation is missing (`agent_not_found`). With `lock`, their rows are locked in that
    order, so two bulk changes at once wait for each other, never deadlock."""
    wanted = sorted(set(agent_ids))
    statement = (
        "SELECT id FROM agents WHERE org_id = %s AND deleted_at IS NULL AND id = ANY(%s::uuid[])"
    )
    if lock:
        statement += " ORDER BY id FOR UPDATE"
    rows = conn.execute(statement, [org_id, wanted]).fetchall()
    found = {row["id"] for row in rows}
    for agent_id in wanted:
        if agent_id not in found:
            raise agent_not_found(agent_id)
    return wanted


def org_not_found(org_id: UUID) -> NotFound:
    return NotFound(f"organisation {org_id} does not exist", code="org_not_found")


def require_org(conn: Connection, org_id: UUID) -> None:
    """Raise `org_not_found` unless the organisation exists."""
    if conn.execute("SELECT 1 FROM orgs WHERE id = %s", [org_id]).fetchone() is None:
        raise org_not_found(org_id)
