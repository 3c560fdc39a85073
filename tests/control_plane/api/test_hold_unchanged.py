"""A hold set again as it is in force (the same end, the same reason, set by the same kind of
actor) changes nothing: no row is rewritten, no `hold.set` goes on the trail, and the answer says
nothing changed. A reload of a form, a double click or a script run twice must not add an entry
per agent to the trail."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

from control_plane.events.trail import Actor
from control_plane.registry import Services
from control_plane.types import Pool
from tests.control_plane.conftest import Agent, Api, Org
from tests.worlds.clocks import ManualClock

UNTIL = "2026-12-20T23:00:00Z"


def _holds_and_trail(pool: Pool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    with pool.connection() as conn:
        holds = conn.execute(
            "SELECT agent_id, until, reason, set_by, set_by_id, set_at FROM holds ORDER BY agent_id"
        ).fetchall()
        events = conn.execute(
            "SELECT id, agent_id, kind, actor_kind, data FROM events ORDER BY id"
        ).fetchall()
    return holds, events


def test_the_same_hold_again_changes_nothing_and_says_so(
    api: Api,
    pool: Pool,
    clock: ManualClock,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    org = make_org()
    agent = make_agent(org)
    path = f"/v1/agents/{agent.agent_id}/hold"
    with api.client(org.panel_key) as panel:
        first = panel.put(path, json={"until": UNTIL, "reason": "audit"})
        assert first.status_code == 200, first.text
        assert first.json()["changed"] is True
        before = _holds_and_trail(pool)
        clock.advance(minutes=5)
        for _ in range(3):
            again = panel.put(path, json={"until": UNTIL, "reason": "audit"})
            assert again.status_code == 200, again.text
            assert again.json() == {**first.json(), "changed": False}
        assert _holds_and_trail(pool) == before

        # Another reason, another end: each a change, one entry each.
        other = panel.put(path, json={"until": UNTIL, "reason": "audit, week two"})
        assert other.json()["changed"] is True
        later = panel.put(path, json={"until": "2026-12-21T23:00:00Z", "reason": "audit, week two"})
        assert later.json()["changed"] is True
    _holds, events = _holds_and_trail(pool)
    assert [e["kind"] for e in events if e["kind"] == "hold.set"] == ["hold.set"] * 3


def test_the_same_hold_by_another_kind_of_actor_is_a_change(
    api: Api,
    pool: Pool,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    services: Services,
    clock: ManualClock,
) -> None:
    org = make_org()
    agent = make_agent(org)
    with api.client(agent.agent_key) as host:
        assert host.put("/v1/agent/hold", json={"until": UNTIL}).json()["changed"] is True
        assert host.put("/v1/agent/hold", json={"until": UNTIL}).json()["changed"] is False
    with api.client(org.panel_key) as panel:
        customer = panel.put(f"/v1/agents/{agent.agent_id}/hold", json={"until": UNTIL})
    assert customer.json()["changed"] is True
    assert customer.json()["set_by"] == "customer"
    holds, events = _holds_and_trail(pool)
    assert [(e["kind"], e["actor_kind"]) for e in events if e["kind"] == "hold.set"] == [
        ("hold.set", "agent"),
        ("hold.set", "user"),
    ]
    assert [h["set_by"] for h in holds] == ["customer"]


def test_a_bulk_hold_again_changes_only_the_agents_whose_hold_differs(
    services: Services,
    pool: Pool,
    clock: ManualClock,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    org = make_org()
    ids = [UUID(make_agent(org, f"web-{n:02}").agent_id) for n in range(6)]
    now = clock.now()
    until = now + timedelta(days=10)
    key = Actor(kind="user", name="first panel key")

    def hold_all(reason: str) -> int:
        return services.pins.hold_many(
            ids, org_id=UUID(org.org_id), until=until, reason=reason, actor=key, now=clock.now()
        )

    assert hold_all("audit") == 6
    before = _holds_and_trail(pool)
    clock.advance(seconds=30)
    assert hold_all("audit") == 0
    assert _holds_and_trail(pool) == before

    # One agent's hold is changed by its host meanwhile: only that one is set again.
    services.pins.hold(
        ids[2],
        org_id=None,
        until=until,
        reason="audit",
        set_by="agent",
        actor=Actor(kind="agent", name="web-02"),
        now=clock.now(),
    )
    assert hold_all("audit") == 1
    holds, events = _holds_and_trail(pool)
    assert {h["set_by"] for h in holds} == {"customer"}
    held_again = [e["agent_id"] for e in events if e["kind"] == "hold.set"][-1]
    assert held_again == ids[2]
    assert len([e for e in events if e["kind"] == "hold.set"]) == 8
