"""Pins (operators) and holds (the host, its customer, operators), each change an event with its
actor.

A pin names a version (or none: "hold at what it runs") for a whole organisation or one agent; an
agent's own pin wins over its organisation's. The offer follows the pin (`rollout.offer`), so a
pinned agent that runs its pin has nothing to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from control_plane.agent_scope import agent_owner, org_of_agent, require_agents, require_org
from control_plane.errors import InvalidInput, NotFound
from control_plane.events.trail import Actor, record_action
from control_plane.inputs import plain_text, stored_text
from control_plane.pins.holds import (
    HoldAnswer,
    HoldSetter,
    clear_hold,
    clear_holds,
    set_hold,
    set_holds,
)
from control_plane.types import Pool
from ground.contract import Instant
from ground.limits import MAX_VERSION_LENGTH

__all__ = ["MAX_PIN_REASON_LENGTH", "PinList", "PinService", "PinView"]

MAX_PIN_REASON_LENGTH = 500


@dataclass(frozen=True, kw_only=True)
class PinView:
    id: UUID
    org_id: UUID | None
    agent_id: UUID | None
    # None: held at whatever the agent runs.
    version: str | None
    reason: str | None
    set_at: Instant
    set_by: str


@dataclass(frozen=True, kw_only=True)
class PinList:
    pins: tuple[PinView, ...]


def _pin_view(row: dict[str, object]) -> PinView:
    return PinView(**row)  # type: ignore[arg-type]  # the row's columns are exactly the fields


class PinService:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    # -- pins (operators) --------------------------------------------------------------------

    def pin(
        self,
        *,
        org_id: UUID | None = None,
        agent_id: UUID | None = None,
        version: object,
        reason: object,
        actor: Actor,
        now: datetime,
    ) -> PinView:
        """Pin an organisation or one agent (exactly one) to `version`, or None: hold at what it
        runs. The version must be one that was published (for some pair) and not withdrawn."""
        assert (org_id is None) != (agent_id is None), "a pin has exactly one scope"
        version_text = stored_text("version", version, MAX_VERSION_LENGTH)
        reason_text = plain_text("reason", reason, MAX_PIN_REASON_LENGTH)
        with self._pool.connection() as conn, conn.transaction():
            if agent_id is not None:
                event_org = org_of_agent(conn, agent_id)
            else:
                assert org_id is not None
                require_org(conn, org_id)
                event_org = org_id
            if version_text is not None and (
                conn.execute(
                    "SELECT 1 FROM releases WHERE agent_version = %s AND withdrawn_at IS NULL",
                    [version_text],
                ).fetchone()
                is None
            ):
                raise InvalidInput(
                    "version",
                    version_text,
                    "is not the version of a published release that is not withdrawn",
                )
            conn.execute(
                "DELETE FROM pins WHERE agent_id = %s OR org_id = %s",
                [agent_id, None if agent_id is not None else org_id],
            )
            row = conn.execute(
                "INSERT INTO pins (org_id, agent_id, version, reason, set_at, set_by)"
                " VALUES (%s, %s, %s, %s, %s, %s)"
                " RETURNING id, org_id, agent_id, version, reason, set_at, set_by",
                [org_id, agent_id, version_text, reason_text, now, actor.name or actor.kind],
            ).fetchone()
            assert row is not None
            record_action(
                conn,
                kind="pin.set",
                actor=actor,
                at=now,
                org_id=event_org,
                agent_id=agent_id,
                data={
                    "scope": "agent" if agent_id else "org",
                    "version": version_text,
                    "reason": reason_text,
                },
            )
            return _pin_view(row)

    def unpin(
        self,
        *,
        org_id: UUID | None = None,
        agent_id: UUID | None = None,
        actor: Actor,
        now: datetime,
    ) -> None:
        assert (org_id is None) != (agent_id is None), "a pin has exactly one scope"
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute(
                "DELETE FROM pins WHERE agent_id = %s OR org_id = %s RETURNING version",
                [agent_id, None if agent_id is not None else org_id],
            ).fetchone()
            if row is None:
                raise NotFound(
                    f"{'agent' if agent_id else 'organisation'} {agent_id or org_id} is not pinned",
                    code="pin_not_found",
                )
            event_org = org_of_agent(conn, agent_id) if agent_id is not None else org_id
            record_action(
                conn,
                kind="pin.removed",
                actor=actor,
                at=now,
                org_id=event_org,
                agent_id=agent_id,
                data={"scope": "agent" if agent_id else "org", "version": row["version"]},
            )

    def pins(self) -> PinList:
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT id, org_id, agent_id, version, reason, set_at, set_by FROM pins"
                " ORDER BY set_at, id"
            ).fetchall()
        return PinList(pins=tuple(_pin_view(row) for row in rows))

    # -- holds -------------------------------------------------------------------------------

    def hold(
        self,
        agent_id: UUID,
        *,
        org_id: UUID | None,
        until: object,
        reason: object,
        set_by: HoldSetter,
        actor: Actor,
        now: datetime,
    ) -> HoldAnswer:
        """Hold the agent until `until`. `org_id` scopes a customer's call (another
        organisation's agent is a 404); None for the agent itself and operators. The same hold
        in force changes nothing (`changed` False, no event)."""
        with self._pool.connection() as conn, conn.transaction():
            owner = agent_owner(conn, agent_id, org_id)
            return set_hold(
                conn,
                org_id=owner,
                agent_id=agent_id,
                until=until,
                reason=reason,
                set_by=set_by,
                actor=actor,
                now=now,
            )

    def hold_many(
        self,
        agent_ids: Sequence[UUID],
        *,
        org_id: UUID,
        until: object,
        reason: object,
        actor: Actor,
        now: datetime,
    ) -> int:
        """A customer's hold of each of the organisation's agents listed, all or none in one
        transaction (one `hold.set` on the trail for each whose hold changed); another
        organisation's agent is a 404. How many holds changed: an agent held so already is
        left as it is."""
        with self._pool.connection() as conn, conn.transaction():
            wanted = require_agents(conn, org_id, agent_ids, lock=True)
            _, changed = set_holds(
                conn,
                org_id=org_id,
                agent_ids=wanted,
                until=until,
                reason=reason,
                set_by="customer",
                actor=actor,
                now=now,
            )
            return len(changed)

    def release_holds(
        self, agent_ids: Sequence[UUID], *, org_id: UUID, actor: Actor, now: datetime
    ) -> int:
        """End the hold of each of the organisation's agents listed, in one transaction: how many
        had one (one `hold.released` each on the trail)."""
        with self._pool.connection() as conn, conn.transaction():
            wanted = require_agents(conn, org_id, agent_ids, lock=True)
            return len(clear_holds(conn, org_id=org_id, agent_ids=wanted, actor=actor, now=now))

    def release_hold(
        self, agent_id: UUID, *, org_id: UUID | None, actor: Actor, now: datetime
    ) -> bool:
        with self._pool.connection() as conn, conn.transaction():
            owner = agent_owner(conn, agent_id, org_id)
            return clear_hold(conn, org_id=owner, agent_id=agent_id, actor=actor, now=now)
