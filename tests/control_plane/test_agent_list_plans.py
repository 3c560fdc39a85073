"""The agent list's page costs in proportion to the page where the query allows it: the newest run
is read for the page's rows only when neither the order nor the filter needs every agent's, and
the "pinned" filter asks each pins index instead of comparing every agent with every pin.

The statements are the product's own (`found_page`, recorded as it runs them), explained with
their parameters on a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg.rows import DictRow, dict_row

from control_plane.agents.agent_list import PAGE_SIZE, AgentQuery, found_page
from control_plane.types import Pool
from tests.control_plane.conftest import Org
from tests.worlds.clocks import ManualClock

FLEET = 300


class RecordingConnection(psycopg.Connection[DictRow]):
    """Keeps every statement it runs, with its parameters."""

    recorded: list[tuple[str, Any]]

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:  # type: ignore[override]
        self.recorded.append((str(query), params))
        return super().execute(query, params, **kwargs)


@pytest.fixture
def fleet(
    pool: Pool, clock: ManualClock, make_org: Callable[[str], Org]
) -> tuple[UUID, list[UUID]]:
    """FLEET agents of one organisation, each with three runs, and one agent in ten pinned."""
    now = clock.now()
    org = UUID(make_org("Hoster").org_id)
    with pool.connection() as conn:
        rows = conn.execute(
            "INSERT INTO agents (org_id, name, created_at, last_seen_at)"
            " SELECT %s, 'host-' || lpad(i::text, 3, '0'), %s, %s - make_interval(mins => i)"
            " FROM generate_series(0, %s - 1) i RETURNING id",
            [org, now, now, FLEET],
        ).fetchall()
        ids = [row["id"] for row in rows]
        conn.execute(
            "INSERT INTO runs (agent_id, org_id, trigger, status, created_at)"
            " SELECT a, %s, 'manual', 'succeeded', %s - make_interval(hours => n)"
            " FROM unnest(%s::uuid[]) a CROSS JOIN generate_series(1, 3) n",
            [org, now, ids],
        )
        conn.execute(
            "INSERT INTO pins (agent_id, version, set_at, set_by)"
            " SELECT unnest(%s::uuid[]), NULL, %s, 'operator'",
            [ids[::10], now],
        )
        conn.execute("ANALYZE")
    return org, ids


@pytest.fixture
def recording(database_url: str) -> Iterator[RecordingConnection]:
    with RecordingConnection.connect(database_url, row_factory=dict_row) as conn:
        conn.recorded = []
        yield conn


def _page_plans(
    conn: RecordingConnection, org: UUID, query: AgentQuery, clock: ManualClock
) -> list[dict[str, Any]]:
    """The plans (EXPLAIN ANALYZE) of the statements that read the page's rows."""
    now = clock.now()
    conn.recorded.clear()
    found_page(conn, org, query, now=now, online_since=now - timedelta(minutes=3))
    plans = []
    for statement, params in list(conn.recorded):
        if "LIMIT" in statement:
            explained = conn.execute(
                "EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params
            ).fetchone()
            assert explained is not None
            plans.append(explained["QUERY PLAN"][0]["Plan"])
    assert plans, "the page was read by no statement with a LIMIT"
    return plans


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


@pytest.mark.parametrize(
    "query",
    [
        pytest.param(AgentQuery(sort="seen", descending=True, page=4), id="deep_page_by_seen"),
        pytest.param(AgentQuery(sort="version", page=2), id="by_version"),
        pytest.param(AgentQuery(search="host-1", page=2), id="searched"),
        pytest.param(AgentQuery(state="offline"), id="offline"),
    ],
)
def test_the_newest_run_is_read_for_the_pages_rows_only(
    fleet: tuple[UUID, list[UUID]],
    recording: RecordingConnection,
    clock: ManualClock,
    query: AgentQuery,
) -> None:
    org, _ = fleet
    for plan in _page_plans(recording, org, query, clock):
        probes = sum(
            node["Actual Loops"] for node in _nodes(plan) if node.get("Relation Name") == "runs"
        )
        assert 0 < probes <= PAGE_SIZE


def test_the_pinned_filter_compares_no_agent_with_every_pin(
    fleet: tuple[UUID, list[UUID]], recording: RecordingConnection, clock: ManualClock
) -> None:
    org, _ = fleet
    for plan in _page_plans(recording, org, AgentQuery(state="pinned"), clock):
        filters = [
            str(node.get("Join Filter", "")) + str(node.get("Filter", "")) for node in _nodes(plan)
        ]
        assert not any("agent_id = a.id) OR" in text for text in filters), filters
