"""Migration 0005 on a database with data: runs from before it stay valid, a missed run only
exists with its reason, and downgrading (which cannot represent a missed run) and upgrading again
work."""

from __future__ import annotations

import psycopg
import pytest

from control_plane import migrate

BEFORE = "0004_releases_runs_events"


def _org_and_agent(conn: psycopg.Connection[tuple[object, ...]]) -> tuple[object, object]:
    org = conn.execute("INSERT INTO orgs (name) VALUES ('Acme') RETURNING id").fetchone()
    assert org is not None
    agent = conn.execute(
        "INSERT INTO agents (org_id, name) VALUES (%s, 'web-01') RETURNING id", [org[0]]
    ).fetchone()
    assert agent is not None
    return org[0], agent[0]


def _scheduled_run(
    conn: psycopg.Connection[tuple[object, ...]], org: object, agent: object, key: str, status: str
) -> None:
    conn.execute(
        "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, created_at)"
        " VALUES (%s, %s, 'schedule', %s, %s::timestamptz, %s, now())",
        [agent, org, key, key + ":00+01:00", status],
    )


def test_runs_from_before_the_migration_are_not_yet_considered(empty_database_url: str) -> None:
    migrate.upgrade(empty_database_url, BEFORE)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        org, agent = _org_and_agent(conn)
        _scheduled_run(conn, org, agent, "2026-11-29T03:00", "succeeded")
    migrate.upgrade(empty_database_url)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        row = conn.execute("SELECT status, miss_reason, notify_considered_at FROM runs").fetchone()
        assert row == ("succeeded", None, None)
        progress = conn.execute(
            "SELECT reconciled_until, passes FROM reconcile_progress"
        ).fetchone()
        assert progress == (None, 0)


def test_downgrade_drops_missed_runs_and_upgrade_again_works(empty_database_url: str) -> None:
    migrate.upgrade(empty_database_url)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        org, agent = _org_and_agent(conn)
        _scheduled_run(conn, org, agent, "2026-11-29T03:00", "succeeded")
        conn.execute(
            "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, miss_reason,"
            " created_at) VALUES (%s, %s, 'schedule', '2026-11-30T03:00',"
            " '2026-11-30T02:00Z', 'missed', 'offline', now())",
            [agent, org],
        )
    migrate.downgrade(empty_database_url, BEFORE)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        assert conn.execute("SELECT slot_key, status FROM runs").fetchall() == [
            ("2026-11-29T03:00", "succeeded")
        ]
        with pytest.raises(psycopg.errors.CheckViolation):
            _scheduled_run(conn, org, agent, "2026-12-01T03:00", "missed")
    migrate.upgrade(empty_database_url)
    assert migrate.current_revision(empty_database_url) == migrate.head_revision()
