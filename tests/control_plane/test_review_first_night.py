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


def _night_missed(conn: psycopg.Connection[Any]) -> None:
    """Every agent missed the night's slot (the missed pass before the review)."""
    agents = conn.execute("SELECT id, org_id FROM agents").fetchall()
    key = slot_key(SLOT_AT.date(), SLOT_AT.time())
    data.insert_missed(
        conn,
        [
            data.SlotCandidate(
                agent_id=a["id"],
                org_id=a["org_id"],
                slot_key=key,
                slot_at=SLOT_AT,
                window_closes=SLOT_AT + WINDOW,
            )
            for a in agents
        ],
        now=SLOT_AT + WINDOW,
    )


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
