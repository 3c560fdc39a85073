"""The fleet the herd, hot-path, manual-caps and balancer benches seed can claim their slot.

Those benches claim `SLOT_KEY` on a clock set to its window; a fleet enrolled after that window
closed would be refused `not_a_slot` on every claim, and the bench would measure refusals of
another kind than it says (or stop: it checks the statuses it gets).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import psycopg
from psycopg.rows import dict_row

from bench.herd import SLOT_AT, SLOT_KEY, seed
from control_plane.claims.slots import checked_slot


def test_every_seeded_agent_holds_the_slot_the_benches_claim(
    database_url: str, tmp_path: Path
) -> None:
    fleet = seed(database_url, 6, 2, tmp_path)
    with psycopg.connect(database_url, row_factory=dict_row) as conn:
        rows = conn.execute(
            "SELECT a.id::text AS agent_id, a.created_at, a.update_schedule_enabled AS enabled,"
            " a.update_schedule_times AS times, s.timezone, s.catch_up_minutes"
            " FROM agents a CROSS JOIN platform_settings s"
        ).fetchall()
    assert sorted(row["agent_id"] for row in rows) == sorted(agent.agent_id for agent in fleet)
    for row in rows:
        slot = checked_slot(
            SLOT_KEY,
            enabled=row["enabled"],
            times=row["times"],
            timezone=row["timezone"],
            catch_up=timedelta(minutes=row["catch_up_minutes"]),
            enrolled_at=row["created_at"],
            now=SLOT_AT + timedelta(seconds=30),
        )
        assert slot.at == SLOT_AT
