"""One action on many agents on the trail: an event per agent in the order given, every event's
document or each agent's own, and a log line per agent — and data that does not match the agents
is refused before anything is written."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest

from control_plane.events.trail import Actor, record_actions
from control_plane.types import Pool
from tests.control_plane.conftest import Org

PANEL_KEY = Actor(kind="user", id=UUID(int=1), name="first panel key")
AT = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)


def _agents(pool: Pool, org: Org, count: int) -> list[UUID]:
    with pool.connection() as conn:
        rows = conn.execute(
            "INSERT INTO agents (org_id, name, created_at)"
            " SELECT %s, 'host-' || i, %s FROM generate_series(1, %s) i RETURNING id",
            [UUID(org.org_id), AT, count],
        ).fetchall()
    # Not in id order: the events follow the order given.
    return [row["id"] for row in reversed(rows)]


def _events(pool: Pool) -> list[dict[str, Any]]:
    with pool.connection() as conn:
        return conn.execute(
            "SELECT org_id, agent_id, run_id, kind, actor_kind, actor_id, actor_name, at, data"
            " FROM events WHERE agent_id IS NOT NULL ORDER BY id"
        ).fetchall()


def test_one_event_each_in_the_order_given_with_one_document(
    pool: Pool, make_org: Callable[[str], Org], caplog: pytest.LogCaptureFixture
) -> None:
    org = make_org("Hoster")
    ids = _agents(pool, org, 3)
    caplog.set_level(logging.INFO, logger="control_plane.trail")
    with pool.connection() as conn:
        record_actions(
            conn,
            kind="hold.set",
            actor=PANEL_KEY,
            at=AT,
            org_id=UUID(org.org_id),
            agent_ids=ids,
            data={"reason": "audit"},
        )
    events = _events(pool)
    assert [e["agent_id"] for e in events] == ids
    assert {
        (e["org_id"], e["run_id"], e["kind"], e["actor_kind"], e["actor_id"], e["actor_name"])
        for e in events
    } == {(UUID(org.org_id), None, "hold.set", "user", PANEL_KEY.id, "first panel key")}
    assert {e["at"] for e in events} == {AT}
    assert [e["data"] for e in events] == [{"reason": "audit"}] * 3
    lines = [r.getMessage() for r in caplog.records if r.name == "control_plane.trail"]
    assert [next(w for w in line.split() if w.startswith("agent=")) for line in lines] == [
        f"agent={agent_id}" for agent_id in ids
    ]


def test_each_agent_its_own_document_and_none_is_empty(
    pool: Pool, make_org: Callable[[str], Org]
) -> None:
    org = make_org("Hoster")
    ids = _agents(pool, org, 3)
    with pool.connection() as conn:
        record_actions(
            conn,
            kind="schedule.changed",
            actor=PANEL_KEY,
            at=AT,
            org_id=UUID(org.org_id),
            agent_ids=ids,
            data_each=[{"n": n} for n in range(3)],
        )
        record_actions(
            conn, kind="hold.released", actor=PANEL_KEY, at=AT, org_id=UUID(org.org_id),
            agent_ids=ids[:1],
        )  # fmt: skip
    assert [e["data"] for e in _events(pool)] == [{"n": 0}, {"n": 1}, {"n": 2}, {}]


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({"data_each": [{"n": 0}, {"n": 1}]}, id="one_document_short"),
        pytest.param({"data_each": [{"n": n} for n in range(4)]}, id="one_document_over"),
        pytest.param({"data": {"n": 0}, "data_each": [{"n": n} for n in range(3)]}, id="both"),
    ],
)
def test_documents_that_do_not_match_the_agents_write_nothing(
    pool: Pool, make_org: Callable[[str], Org], data: dict[str, Any]
) -> None:
    org = make_org("Hoster")
    ids = _agents(pool, org, 3)
    with pool.connection() as conn, pytest.raises(ValueError, match="record_actions"):
        record_actions(
            conn,
            kind="schedule.changed",
            actor=PANEL_KEY,
            at=AT,
            org_id=UUID(org.org_id),
            agent_ids=ids,
            **data,
        )
    assert _events(pool) == []
