"""Bulk changes of many agents in a few statements: a hold, its end and an update now for each
agent listed, one change per agent on the trail, all or none — and a selection that smuggles
another organisation's agent changes nothing of either organisation."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from control_plane.errors import NotFound
from control_plane.events.trail import Actor
from control_plane.registry import Services
from control_plane.types import Pool
from tests.control_plane.conftest import Org
from tests.worlds.clocks import ManualClock

PANEL_KEY = Actor(kind="user", name="first panel key")
MANY = 250


def _fleet(pool: Pool, org: Org, now: datetime, count: int) -> list[UUID]:
    """`count` agents of the organisation, host-000…, in name order."""
    with pool.connection() as conn:
        rows = conn.execute(
            "INSERT INTO agents (org_id, name, created_at)"
            " SELECT %s, 'host-' || lpad(i::text, 3, '0'), %s FROM generate_series(0, %s - 1) i"
            " RETURNING id",
            [UUID(org.org_id), now, count],
        ).fetchall()
    return [row["id"] for row in rows]


def _hold(pool: Pool, agent_id: UUID, now: datetime, set_by: str = "agent") -> None:
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO holds (agent_id, until, reason, set_by, set_at)"
            " VALUES (%s, %s, 'maintenance', %s, %s)",
            [agent_id, now + timedelta(days=3), set_by, now],
        )


def _trail(pool: Pool, kind: str) -> list[dict[str, Any]]:
    with pool.connection() as conn:
        return conn.execute(
            "SELECT id, org_id, agent_id, run_id, actor_kind, actor_name, at, data FROM events"
            " WHERE kind = %s ORDER BY id",
            [kind],
        ).fetchall()


def _everything(pool: Pool) -> tuple[list[tuple[Any, ...]], ...]:
    """Every hold, run and event of every organisation, as rows."""
    with pool.connection() as conn:
        holds = conn.execute(
            "SELECT agent_id, until, reason, set_by, set_at FROM holds ORDER BY agent_id"
        ).fetchall()
        runs = conn.execute("SELECT id, agent_id, status FROM runs ORDER BY id").fetchall()
        events = conn.execute("SELECT id, agent_id, kind FROM events ORDER BY id").fetchall()
    return tuple([tuple(row.values()) for row in table] for table in (holds, runs, events))


def test_a_hold_of_many_agents_holds_each_with_one_change_each(
    services: Services, pool: Pool, clock: ManualClock, make_org: Callable[[str], Org]
) -> None:
    now = clock.now()
    org = make_org("Hoster")
    ids = _fleet(pool, org, now, MANY)
    _hold(pool, ids[7], now)  # the host's own hold: the customer's replaces it
    until = now + timedelta(days=10)

    held = services.pins.hold_many(
        [*ids, ids[0]],
        org_id=UUID(org.org_id),
        until=until,
        reason="audit",
        actor=PANEL_KEY,
        now=now,
    )

    assert held == MANY
    with pool.connection() as conn:
        holds = conn.execute("SELECT agent_id, until, reason, set_by FROM holds").fetchall()
    assert {row["agent_id"] for row in holds} == set(ids)
    assert {(row["until"], row["reason"], row["set_by"]) for row in holds} == {
        (until, "audit", "customer")
    }
    events = _trail(pool, "hold.set")
    assert sorted(e["agent_id"] for e in events) == sorted(ids)
    assert {(e["org_id"], e["actor_kind"], e["actor_name"], e["at"]) for e in events} == {
        (UUID(org.org_id), "user", "first panel key", now)
    }
    assert {str(e["data"]) for e in events} == {
        str({"until": "2026-12-10T01:00:00Z", "reason": "audit", "set_by": "customer"})
    }


def test_ending_many_holds_ends_those_held_one_change_each(
    services: Services, pool: Pool, clock: ManualClock, make_org: Callable[[str], Org]
) -> None:
    now = clock.now()
    org = make_org("Hoster")
    ids = _fleet(pool, org, now, MANY)
    for agent_id in ids[::2]:
        _hold(pool, agent_id, now)

    ended = services.pins.release_holds(ids, org_id=UUID(org.org_id), actor=PANEL_KEY, now=now)

    assert ended == len(ids[::2])
    with pool.connection() as conn:
        left = conn.execute("SELECT count(*) AS n FROM holds").fetchone()
    assert left is not None and left["n"] == 0
    events = _trail(pool, "hold.released")
    assert [e["agent_id"] for e in events] == sorted(ids[::2])
    assert {(e["actor_kind"], e["actor_name"]) for e in events} == {("user", "first panel key")}


def test_update_now_for_many_asks_once_per_agent_and_keeps_a_pending_one(
    services: Services, pool: Pool, clock: ManualClock, make_org: Callable[[str], Org]
) -> None:
    now = clock.now()
    org = make_org("Hoster")
    ids = _fleet(pool, org, now, MANY)
    first = services.runs.request_manual_update(UUID(org.org_id), ids[3], None, now=now)

    asked = services.runs.request_manual_updates(
        UUID(org.org_id), ids, None, now=now, person=(UUID(int=7), "Ada")
    )

    assert (asked.requested, asked.pending) == (MANY - 1, 1)
    with pool.connection() as conn:
        runs = conn.execute(
            "SELECT id, agent_id FROM runs WHERE trigger = 'manual' AND status = 'requested'"
        ).fetchall()
    assert sorted(row["agent_id"] for row in runs) == sorted(ids)
    assert first.run.run_id in {row["id"] for row in runs}
    events = _trail(pool, "update.requested")
    # One request each, tied to its own run; the earlier one keeps its own event.
    assert {(e["agent_id"], e["run_id"]) for e in events} == {
        (row["agent_id"], row["id"]) for row in runs
    }
    assert len(events) == MANY
    assert {(e["actor_kind"], e["actor_name"]) for e in events[1:]} == {("user", "Ada")}


@pytest.mark.parametrize("action", ["hold", "release", "update"])
def test_a_selection_smuggling_another_organisations_agent_changes_nothing(
    services: Services,
    pool: Pool,
    clock: ManualClock,
    make_org: Callable[[str], Org],
    action: str,
) -> None:
    now = clock.now()
    org = make_org("Hoster")
    other = make_org("Other")
    mine = _fleet(pool, org, now, 5)
    theirs = _fleet(pool, other, now, 2)
    # Each organisation has something the action would change: holds to end, none pending.
    _hold(pool, mine[0], now)
    _hold(pool, theirs[0], now, set_by="operator")
    before = _everything(pool)
    selection = [*mine, theirs[0]]

    with pytest.raises(NotFound) as refused:
        if action == "hold":
            services.pins.hold_many(
                selection,
                org_id=UUID(org.org_id),
                until=now + timedelta(days=1),
                reason="audit",
                actor=PANEL_KEY,
                now=now,
            )
        elif action == "release":
            services.pins.release_holds(
                selection, org_id=UUID(org.org_id), actor=PANEL_KEY, now=now
            )
        else:
            services.runs.request_manual_updates(UUID(org.org_id), selection, None, now=now)

    assert str(theirs[0]) in str(refused.value)
    assert _everything(pool) == before
