"""The operators' trail: every operator action and every schedule change is an event with its
actor, written in the action's own transaction, and one log line of the server.

Kinds (the `data` of each says what changed):

    brake.engaged, brake.released           the reason; how many tokens were revoked
    settings.changed                        `before` and `after` of the fields that changed
    release.published                       version, manifest_version, channel, platform, key id
    trust_root.published                    version, expires_at, release and root key ids, the
                                            root threshold
    credential.issued, credential.revoked,  audience, name, scope; a rotation names both
    credential.rotated                      credentials
    agent.deleted                           the agent's name; its credentials revoked
    enrollment_token.created, .revoked      the token's id, label, uses, expiry, name pattern
    enrollment_token.used, .refused         the same, and the agent made (its id and name) or
                                            the refusal's code and the name asked for; the
                                            actor is the host, named by the token's id
    schedule.changed                        `before` and `after` of the agent's schedule
    default_schedule.changed                `before` (null: the platform's) and `after` of the
                                            schedule an organisation's new agents take
    person.invited                          the person's id, name and role (never the link)
    person.removed                          the person's id and name
    person.role_changed                     the person's id and name, the role `from` and `to`
    person.invitation_reissued,             the person's id and name (never the link)
    person.password_reset
    oidc.configured                         the provider's issuer and client id (never its
                                            secret)
    oidc.removed                            the provider's issuer; how many sessions ended
    platform.restored                       after a restore: how many tokens were revoked
    retention.completed                     the cutoff of a walk and the rows it removed by
                                            table; the actor is the control plane

The actor is a credential (its kind, id and name as it was when it acted), or the command line
(`operator`, no id, named `cli:<user>`), so the trail says who even after a key is revoked.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from psycopg.types.json import Jsonb

from control_plane.types import Connection

__all__ = ["Actor", "ActorKind", "record_action", "record_actions", "record_event"]

ActorKind = Literal["schedule", "user", "agent", "operator", "control_plane"]

# Its own logger, so a deployment can route the trail apart from the rest (`serve` shows it at
# INFO whatever `--log-level` says).
trail_log = logging.getLogger("control_plane.trail")


@dataclass(frozen=True, kw_only=True)
class Actor:
    kind: ActorKind
    id: UUID | None = None
    name: str | None = None


def record_event(
    conn: Connection,
    *,
    org_id: UUID | None,
    agent_id: UUID | None,
    run_id: UUID | None,
    kind: str,
    actor_kind: ActorKind,
    actor_id: UUID | None = None,
    actor_name: str | None = None,
    at: datetime,
    data: dict[str, Any] | None = None,
) -> None:
    conn.execute(
        "INSERT INTO events (org_id, agent_id, run_id, kind, actor_kind, actor_id, actor_name,"
        " at, data) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
        [org_id, agent_id, run_id, kind, actor_kind, actor_id, actor_name, at, Jsonb(data or {})],
    )


def record_action(
    conn: Connection,
    *,
    kind: str,
    actor: Actor,
    at: datetime,
    org_id: UUID | None = None,
    agent_id: UUID | None = None,
    data: dict[str, Any] | None = None,
) -> None:
    """An operator action or a schedule change: its event, and the server's log line.

    Logged as the event is written, inside the action's transaction: a line for an action whose
    commit then failed is possible, an action without its line is not."""
    record_event(
        conn,
        org_id=org_id,
        agent_id=agent_id,
        run_id=None,
        kind=kind,
        actor_kind=actor.kind,
        actor_id=actor.id,
        actor_name=actor.name,
        at=at,
        data=data,
    )
    _log_action(kind, actor, org_id, agent_id, data)


def record_actions(
    conn: Connection,
    *,
    kind: str,
    actor: Actor,
    at: datetime,
    org_id: UUID,
    agent_ids: Sequence[UUID],
    data: dict[str, Any] | None = None,
    data_each: Sequence[dict[str, Any]] | None = None,
) -> None:
    """One action on many agents of one organisation: an event per agent written by one
    statement (a bulk change of 2,000 agents costs one round trip, not 2,000), and a log line
    per agent as `record_action` writes it. `data` is every event's, or `data_each` one per
    agent in `agent_ids`' order (sent only when the agents' differ: 2,000 copies of one
    document cost more to send and parse than the rows take to write)."""
    if data is not None and data_each is not None:
        raise ValueError("record_actions takes data or data_each, not both")
    if data_each is not None and len(data_each) != len(agent_ids):
        raise ValueError("record_actions takes one data_each per agent")
    if not agent_ids:
        return
    # Every event's own values; the agents (and each one's data) are unnested after them.
    insert = (
        "INSERT INTO events (org_id, agent_id, run_id, kind, actor_kind, actor_id, actor_name,"
        " at, data) SELECT %s, e.agent_id, NULL, %s, %s, %s, %s, %s,"
    )
    shared = [org_id, kind, actor.kind, actor.id, actor.name, at]
    if data_each is None:
        conn.execute(
            insert + " %s FROM unnest(%s::uuid[]) WITH ORDINALITY AS e(agent_id, n) ORDER BY e.n",
            [*shared, Jsonb(data or {}), list(agent_ids)],
        )
    else:
        conn.execute(
            insert + " e.data FROM unnest(%s::uuid[], %s::jsonb[])"
            " WITH ORDINALITY AS e(agent_id, data, n) ORDER BY e.n",
            [*shared, list(agent_ids), [Jsonb(item) for item in data_each]],
        )
    for index, agent_id in enumerate(agent_ids):
        _log_action(kind, actor, org_id, agent_id, data if data_each is None else data_each[index])


def _log_action(
    kind: str,
    actor: Actor,
    org_id: UUID | None,
    agent_id: UUID | None,
    data: dict[str, Any] | None,
) -> None:
    trail_log.info(
        "%s by %s %s (%s) org=%s agent=%s %s",
        kind,
        actor.kind,
        actor.name or "-",
        actor.id or "-",
        org_id or "-",
        agent_id or "-",
        json.dumps(data or {}, sort_keys=True, default=str, ensure_ascii=True),
    )
