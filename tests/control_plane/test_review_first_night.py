"""A new fleet's first review: its tables were analysed empty, and the review fills
`agent_mentions` as it goes, naming every agent that never consumed a slot as stale. A plan kept
for the check of who was named already, made while the table was empty, joins each agent against
the whole table (a nested loop over a materialised scan: the names times the agents, for every
organisation); so that check is planned at every run, with the table's current size, and never
kept as a prepared statement however many organisations one connection reviews.
"""

from __future__ import annotations

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


def _candidates(conn: psycopg.Connection[Any]) -> list[data.SlotCandidate]:
    """Every agent's slot of the night, as the missed pass finds them when the window closed."""
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


def _night_missed(conn: psycopg.Connection[Any]) -> None:
    """Every agent missed the night's slot (the missed pass before the review)."""
    data.insert_missed(conn, _candidates(conn), now=SLOT_AT + WINDOW)


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
        _night_missed(conn)
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


def _runs_pages_read(plan: dict[str, Any]) -> int:
    """The pages of `runs` the plan's scans of it read (every loop), the insert's own aside."""
    read = 0
    if plan.get("Relation Name") == "runs" and plan["Node Type"] != "ModifyTable":
        read += plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]
    return read + sum(_runs_pages_read(child) for child in plan.get("Plans", []))


def test_a_new_fleets_first_missed_pass_reads_no_run_it_is_writing(
    database_url: str, tmp_path: Path
) -> None:
    """With `runs` analysed while empty, a check of each candidate's runs planned as a scan is
    cheap only while the table is empty: made in the statement that inserts the misses, each
    candidate's scan read the pages inserted for the candidates before it (the fleet squared)."""
    seed_fleet(database_url, FLEET, tmp_path)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    with psycopg.connect(database_url, row_factory=dict_row) as conn:
        candidates = _candidates(conn)
    explain = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "
    with (
        psycopg.connect(database_url, row_factory=dict_row, autocommit=True) as conn,
        conn.transaction(force_rollback=True),
    ):
        checked = conn.execute(
            explain + data._UNCONSUMED,
            data.unconsumed_parameters(candidates, lambda _c: False, lambda _c: False),
        ).fetchone()
        unconsumed = conn.execute(
            data._UNCONSUMED,
            data.unconsumed_parameters(candidates, lambda _c: False, lambda _c: False),
        ).fetchall()
        inserted = conn.execute(
            explain + data._INSERT_MISSED, data.missed_parameters(unconsumed, SLOT_AT + WINDOW)
        ).fetchone()
    assert checked is not None and inserted is not None
    assert inserted["QUERY PLAN"][0]["Plan"]["Actual Rows"] == FLEET.agents
    pages = sum(_runs_pages_read(row["QUERY PLAN"][0]["Plan"]) for row in (checked, inserted))
    assert pages < FLEET.agents, pages
