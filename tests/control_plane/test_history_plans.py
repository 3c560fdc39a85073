"""The customer's history pages, exports and versions per night read runs and events through an
index, whatever the history's size: a page is the index's order from a position (no sort of an
owner's rows, no rows skipped one by one), an export and the versions per night one range of an
organisation's index. Checked on a seeded history with sequential scans priced out, as
`test_query_plans` checks the other reads."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from control_plane.history import HistoryQuery, Position
from control_plane.history.data import Direction, Table, page_statement
from control_plane.registry import Services
from tests.control_plane.test_query_plans import (  # the seeded history and its plans' check
    Recorder,
    Statement,
    explained,
    recorder,
    seeded_url,
    services,
    unbounded_reads,
    world,
)

__all__ = ["recorder", "seeded_url", "services", "world"]  # fixtures, shared

ZONE = ZoneInfo("Europe/Amsterdam")


def _indexes(url: str, statement: Statement) -> tuple[set[str], set[str]]:
    """The indexes a statement's plan reads, and its node types."""
    nodes = explained(url, statement)
    return {n["Index Name"] for n in nodes if "Index Name" in n}, {n["Node Type"] for n in nodes}


@pytest.mark.parametrize("table", ["runs", "events"])
@pytest.mark.parametrize("one_agent", [False, True], ids=["organisation", "agent"])
@pytest.mark.parametrize("direction", ["older", "newer"])
def test_a_page_is_read_in_its_indexs_order_from_its_position(
    table: Table,
    one_agent: bool,
    direction: Direction,
    world: dict[str, Any],
    seeded_url: str,
) -> None:
    at = world["slot_at"] - timedelta(days=10)
    key: Any = world["agent_id"] if table == "runs" else 1_000  # any id of the table's type
    statement, values = page_statement(
        table,
        org_id=world["org_id"],
        agent_id=world["agent_id"] if one_agent else None,
        since=None,
        until=None,
        position=(at, key),
        direction=direction,
        limit=51,
    )
    read = Statement(statement, values)
    assert unbounded_reads(seeded_url, [read]) == []
    indexes, nodes = _indexes(seeded_url, read)
    # An organisation's page may also walk the table's time index, stopped by the page's Limit
    # (the planner's choice where one organisation holds a large share of the rows, as here).
    expected = {
        ("runs", False): {"runs_org_created"},
        ("runs", True): {"runs_agent_created"},
        ("events", False): {"events_org_at", "events_at"},
        ("events", True): {"events_agent_at"},
    }[table, one_agent]
    assert expected & indexes, (indexes, nodes)
    # An agent's runs are in (created_at) order in their index: rows of one instant are put in
    # id order among themselves (an incremental sort), never the agent's whole history sorted.
    assert "Sort" not in nodes, nodes


@pytest.mark.parametrize("table", ["runs", "events"])
def test_an_export_reads_one_range_of_the_organisations_index(
    table: Table, world: dict[str, Any], seeded_url: str
) -> None:
    until = world["slot_at"]
    statement, values = page_statement(
        table,
        org_id=world["org_id"],
        agent_id=None,
        since=until - timedelta(days=30),
        until=until,
        position=None,
        direction="older",
        limit=None,
    )
    read = Statement(statement, values)
    assert unbounded_reads(seeded_url, [read]) == []
    indexes, nodes = _indexes(seeded_url, read)
    # Explained as a statement, the whole range may be read as a bitmap and sorted; the export
    # runs it as a cursor, whose plan favours the index's own order (the first rows soon).
    assert {"runs": "runs_org_created", "events": "events_org_at"}[table] in indexes, nodes


def test_the_services_pages_and_versions_per_night_read_through_indexes(
    recorder: Recorder, services: Services, world: dict[str, Any], seeded_url: str
) -> None:
    recorder.take()
    first = services.history.runs(HistoryQuery(org_id=world["org_id"]))
    assert first.older is not None, "the seeded organisation has more than a page of runs"
    services.history.runs(HistoryQuery(org_id=world["org_id"], before=first.older))
    services.history.events(
        HistoryQuery(
            org_id=world["org_id"],
            agent_id=world["agent_id"],
            before=Position(at=world["slot_at"], id=10**9),
        )
    )
    nights = services.history.versions_per_night(
        world["org_id"], nights=30, zone=ZONE, now=world["slot_at"]
    )
    assert any(night.agents for night in nights)
    statements = recorder.take()
    assert unbounded_reads(seeded_url, statements) == []
