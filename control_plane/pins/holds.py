"""Holds: one agent's scheduled updates skipped until a date, set by its host, its customer or an
operator (the latest setter wins; one hold per agent).

Bounds: `until` must be in the future and at most `MAX_HOLD` ahead — a hold is a pause ("not
during the audit next week"), not a way to switch updates off for good; that is the schedule's
`enabled`, which the customer sees on the agent page.

A hold set again as it is in force — the same `until`, the same reason, set by the same kind of
setter — changes nothing: its row is not rewritten and no `hold.set` goes on the trail (a reload,
a double click or a script run twice must not add an entry per agent). The answer says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal
from uuid import UUID

from control_plane.errors import InvalidInput
from control_plane.events.trail import Actor, record_actions
from control_plane.inputs import plain_text
from control_plane.types import Connection
from ground.contract import HoldView, format_instant
from ground.contract.messages import MAX_HOLD_REASON_LENGTH

__all__ = [
    "MAX_HOLD",
    "MAX_HOLD_REASON_LENGTH",
    "ActiveHold",
    "HoldAnswer",
    "HoldSetter",
    "active_hold",
    "active_holds",
    "clear_hold",
    "clear_holds",
    "hold_view",
    "set_hold",
    "set_holds",
]

MAX_HOLD = timedelta(days=90)

HoldSetter = Literal["agent", "customer", "operator"]


@dataclass(frozen=True, kw_only=True)
class ActiveHold:
    until: datetime
    reason: str | None
    set_by: HoldSetter


def active_holds(
    conn: Connection, agent_ids: Iterable[UUID], now: datetime
) -> dict[UUID, ActiveHold]:
    """The holds of `agent_ids` in force at `now`, by agent (an agent not held is absent)."""
    ids = list(dict.fromkeys(agent_ids))
    if not ids:
        return {}
    rows = conn.execute(
        "SELECT agent_id, until, reason, set_by FROM holds"
        " WHERE agent_id = ANY(%s::uuid[]) AND until > %s",
        [ids, now],
    ).fetchall()
    return {
        row["agent_id"]: ActiveHold(until=row["until"], reason=row["reason"], set_by=row["set_by"])
        for row in rows
    }


def active_hold(conn: Connection, agent_id: UUID, now: datetime) -> ActiveHold | None:
    return active_holds(conn, [agent_id], now).get(agent_id)


class HoldAnswer(HoldView):
    """The hold in force after a request to set it; `changed`: False when it was already so."""

    changed: bool


def hold_view(hold: ActiveHold) -> HoldView:
    return HoldView(until=hold.until, reason=hold.reason, set_by=hold.set_by)


def set_hold(
    conn: Connection,
    *,
    org_id: UUID,
    agent_id: UUID,
    until: object,
    reason: object,
    set_by: HoldSetter,
    actor: Actor,
    now: datetime,
) -> HoldAnswer:
    """Hold the agent until `until` (inside the caller's transaction; the agent is checked)."""
    view, changed = set_holds(
        conn,
        org_id=org_id,
        agent_ids=[agent_id],
        until=until,
        reason=reason,
        set_by=set_by,
        actor=actor,
        now=now,
    )
    return HoldAnswer(**view.model_dump(), changed=bool(changed))


def set_holds(
    conn: Connection,
    *,
    org_id: UUID,
    agent_ids: Sequence[UUID],
    until: object,
    reason: object,
    set_by: HoldSetter,
    actor: Actor,
    now: datetime,
) -> tuple[HoldView, list[UUID]]:
    """Hold each of the organisation's agents listed until `until`, inside the caller's
    transaction (which checked the agents): one statement for the holds and one for their
    `hold.set` events, however many agents. The hold each now has, and the agents whose hold
    changed (in id order): an agent already held so is left as it is, without an event."""
    if not isinstance(until, datetime) or until.tzinfo is None:
        raise InvalidInput("until", until, "is not an aware instant (RFC 3339 with Z or offset)")
    if until <= now:
        raise InvalidInput(
            "until", format_instant(until), f"is not after now ({format_instant(now)})"
        )
    if until > now + MAX_HOLD:
        raise InvalidInput(
            "until",
            format_instant(until),
            f"is more than {MAX_HOLD.days} days ahead (at most {format_instant(now + MAX_HOLD)};"
            " to stop updates for good, switch the schedule off)",
        )
    # The reason is shown on the host by `nachtwacht agent status`.
    reason_text = plain_text("reason", reason, MAX_HOLD_REASON_LENGTH)
    rows = conn.execute(
        "INSERT INTO holds (agent_id, until, reason, set_by, set_by_id, set_at)"
        " SELECT held.agent_id, %(until)s, %(reason)s, %(set_by)s, %(set_by_id)s, %(now)s"
        " FROM unnest(%(agents)s::uuid[]) AS held(agent_id)"
        " ON CONFLICT (agent_id) DO UPDATE SET"
        " until = EXCLUDED.until, reason = EXCLUDED.reason, set_by = EXCLUDED.set_by,"
        " set_by_id = EXCLUDED.set_by_id, set_at = EXCLUDED.set_at"
        # The same hold in force is left alone: no row rewritten, no event below.
        " WHERE NOT (holds.until = EXCLUDED.until AND holds.until > %(now)s"
        " AND holds.reason IS NOT DISTINCT FROM EXCLUDED.reason"
        " AND holds.set_by = EXCLUDED.set_by)"
        " RETURNING agent_id",
        {
            "until": until,
            "reason": reason_text,
            "set_by": set_by,
            "set_by_id": actor.id,
            "now": now,
            "agents": list(dict.fromkeys(agent_ids)),
        },
    ).fetchall()
    changed = sorted(row["agent_id"] for row in rows)
    record_actions(
        conn,
        kind="hold.set",
        actor=actor,
        at=now,
        org_id=org_id,
        agent_ids=changed,
        data={"until": format_instant(until), "reason": reason_text, "set_by": set_by},
    )
    return HoldView(until=until, reason=reason_text, set_by=set_by), changed


def clear_hold(
    conn: Connection, *, org_id: UUID, agent_id: UUID, actor: Actor, now: datetime
) -> bool:
    """End the agent's hold; False when it had none (still a success: the agent is not held)."""
    return bool(clear_holds(conn, org_id=org_id, agent_ids=[agent_id], actor=actor, now=now))


def clear_holds(
    conn: Connection, *, org_id: UUID, agent_ids: Sequence[UUID], actor: Actor, now: datetime
) -> list[UUID]:
    """End the hold of each of the organisation's agents listed, inside the caller's transaction
    (which checked the agents): one `hold.released` each for those that had one, which are
    returned (in id order)."""
    rows = conn.execute(
        "DELETE FROM holds WHERE agent_id = ANY(%s::uuid[]) RETURNING agent_id",
        [list(agent_ids)],
    ).fetchall()
    ended = sorted(row["agent_id"] for row in rows)
    record_actions(conn, kind="hold.released", actor=actor, at=now, org_id=org_id, agent_ids=ended)
    return ended
