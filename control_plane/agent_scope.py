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
    "agent_owner",
    "org_not_found",
    "org_of_agent",
    "require_agent",
    "require_agents",
    "require_org",
    "unknown_agent",
]


def agent_not_found(agent_id: UUID) -> NotFound:
    # Another organisation's agent is reported exactly like one that does not exist.
    return NotFound(
        f"agent {agent_id} does not exist in this organisation", code=AnswerCode.AGENT_NOT_FOUND
    )


def unknown_agent(agent_id: UUID) -> NotFound:
    """An agent id that names no agent, where no organisation scopes the call."""
    return NotFound(f"agent {agent_id} does not exist", code=AnswerCode.AGENT_NOT_FOUND)


def require_agent(conn: Connection, org_id: UUID, agent_id: UUID) -> None:
    """Raise `agent_not_found` unless the agent belongs to the organisation."""
    found = conn.execute(
        "SELECT 1 FROM agents WHERE id = %s AND org_id = %s AND deleted_at IS NULL",
        [agent_id, org_id],
    ).fetchone()
    if found is None:
        raise agent_not_found(agent_id)


def org_of_agent(conn: Connection, agent_id: UUID) -> UUID:
    """The organisation of a live agent (else `unknown_agent`)."""
    row = conn.execute(
        "SELECT org_id FROM agents WHERE id = %s AND deleted_at IS NULL", [agent_id]
    ).fetchone()
    if row is None:
        raise unknown_agent(agent_id)
    org: UUID = row["org_id"]
    return org


def agent_owner(conn: Connection, agent_id: UUID, org_id: UUID | None) -> UUID:
    """The organisation an agent's change is recorded under: `org_id`, a customer's call, once
    the agent is checked to be its (`agent_not_found`); None, for the agent itself and
    operators, the agent's own."""
    if org_id is not None:
        require_agent(conn, org_id, agent_id)
        return org_id
    return org_of_agent(conn, agent_id)


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
