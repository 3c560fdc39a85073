"""A new fleet's first night, on tables analysed while empty (an operator's ANALYZE after the
install does that): the planner takes them for empty however many rows a statement writes.

- The missed pass inserts the night's misses into `runs` in one statement that also checks
  `runs` for each candidate: a check planned as a sequential scan of the "empty" table is run
  once per candidate over the pages that same statement has appended so far, a cost that grows
  with the square of the fleet.
- The review fills `agent_mentions` as it goes, naming every agent that never consumed a slot
  as stale. A plan kept for the check of who was named already, made while the table was
  empty, joins each agent against the whole table (a nested loop over a materialised scan);
  so that check is planned at every run, with the table's current size, and never kept as a
  prepared statement however many organisations one connection reviews.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
from psycopg.rows import dict_row

from bench.year_of_history import ZONE, History, seed_fleet
from control_plane.reconcile import data
from control_plane.reconcile.review import review_closed_slots
from shared_planner import slot_key

FLEET = History(agents=600, orgs=30)
SLOT_AT = datetime.combine(FLEET.until, datetime.min.time(), ZoneInfo(ZONE)).replace(hour=3)
WINDOW = timedelta(minutes=15)


def _night(conn: psycopg.Connection[Any]) -> list[data.SlotCandidate]:
    """The night's slot of every agent, as the missed pass finds it."""
    key = slot_key(SLOT_AT.date(), SLOT_AT.time())
    return [
        data.SlotCandidate(
            agent_id=a["id"],
            org_id=a["org_id"],
            slot_key=key,
            slot_at=SLOT_AT,
            window_closes=SLOT_AT + WINDOW,
        )
        for a in conn.execute("SELECT id, org_id FROM agents").fetchall()
    ]


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from _nodes(child)


def test_the_first_nights_misses_never_read_runs_once_per_candidate(
    database_url: str, tmp_path: Path
) -> None:
    seed_fleet(database_url, FLEET, tmp_path)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    with (
        psycopg.connect(database_url, row_factory=dict_row) as conn,
        conn.transaction(force_rollback=True),
    ):
        candidates = _night(conn)
        row = conn.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + data._INSERT_MISSED,
            {
                "agent_ids": [c.agent_id for c in candidates],
                "org_ids": [c.org_id for c in candidates],
                "keys": [c.slot_key for c in candidates],
                "ats": [c.slot_at for c in candidates],
                "closes": [c.window_closes for c in candidates],
                "platform_down": [False for _ in candidates],
                "now": SLOT_AT + WINDOW,
                "brake_refusal": "brake",
                **data._MISS_REASONS,
            },
        ).fetchone()
    assert row is not None
    repeated = [
        f"{node['Node Type']} run {node['Actual Loops']} times"
        for node in _nodes(row["QUERY PLAN"][0]["Plan"])
        if node.get("Relation Name") == "runs"
        and node["Node Type"] == "Seq Scan"
        and node["Actual Loops"] > 1
    ]
    assert repeated == []


def test_a_new_fleets_first_review_plans_its_reads_of_the_names_at_every_run(
    database_url: str, tmp_path: Path
) -> None:
    seed_fleet(database_url, FLEET, tmp_path)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("ANALYZE")  # as a new deployment's tables are: analysed while empty
    now = SLOT_AT + WINDOW + timedelta(minutes=5)
    with (
        psycopg.connect(database_url, row_factory=dict_row, autocommit=True) as conn,
        conn.transaction(force_rollback=True),
    ):
        data.insert_missed(conn, _night(conn), now=SLOT_AT + WINDOW)  # every agent missed it
        result = review_closed_slots(
            conn,
            zone=ZoneInfo(ZONE),
            window=WINDOW,
            until=now,
            outcome_grace=timedelta(minutes=60),
            now=now,
        )
        named = conn.execute("SELECT count(*) AS n FROM agent_mentions").fetchone()
        kept = conn.execute(
            "SELECT statement FROM pg_prepared_statements WHERE statement ILIKE %s",
            ["%FROM agent_mentions%"],
        ).fetchall()
    assert result.notified == FLEET.orgs
    assert named is not None and named["n"] == FLEET.agents, "every agent was named as stale"
    assert [row["statement"] for row in kept] == []
