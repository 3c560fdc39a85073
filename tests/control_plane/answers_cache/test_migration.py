"""Migration 0011 follows revision 0010's tables (holds, pins, canaries, halts, rollout
settings) when it runs after them, and its downgrade takes every trigger it made away."""

from __future__ import annotations

import psycopg

from control_plane import migrate

# Stand-ins with the columns the triggers name, as revision 0010 creates them before 0011 runs.
ISSUE_14_TABLES = """
CREATE TABLE holds (agent_id uuid, until timestamptz);
CREATE TABLE canary_agents (agent_id uuid);
CREATE TABLE pins (org_id uuid, agent_id uuid);
CREATE TABLE release_halts (id uuid);
CREATE TABLE rollout_settings (canary_share_percent integer);
"""
AGENT = "0b1c2d3e-0000-4000-8000-000000000001"
ORG = "0b1c2d3e-0000-4000-8000-000000000002"


def _changes(
    conn: psycopg.Connection[tuple[object, ...]], statement: str, *params: object
) -> set[object]:
    (last,) = conn.execute("SELECT coalesce(max(id), 0) FROM answer_changes").fetchone() or (0,)
    conn.execute(statement, params)
    rows = conn.execute(
        "SELECT scope, subject::text FROM answer_changes WHERE id > %s", [last]
    ).fetchall()
    return set(rows)


def test_revision_0010s_tables_are_followed_when_they_exist(empty_database_url: str) -> None:
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        conn.execute(ISSUE_14_TABLES)
    migrate.upgrade(empty_database_url)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        held = _changes(conn, "INSERT INTO holds VALUES (%s, now())", AGENT)
        assert held == {("agent", AGENT)}
        canary = _changes(conn, "INSERT INTO canary_agents VALUES (%s)", AGENT)
        assert canary == {("agent", AGENT)}
        assert _changes(conn, "INSERT INTO pins VALUES (%s, NULL)", ORG) == {("org", ORG)}
        assert _changes(conn, "INSERT INTO pins VALUES (NULL, %s)", AGENT) == {("agent", AGENT)}
        assert _changes(conn, "INSERT INTO release_halts VALUES (NULL)") == {("all", None)}
        settings = _changes(conn, "UPDATE rollout_settings SET canary_share_percent = 1")
        assert settings == {("all", None)}
    migrate.downgrade(empty_database_url, "0008_release_tracks_withdraw")
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        left = conn.execute(
            "SELECT tgname FROM pg_trigger WHERE tgname LIKE '%answer_change%'"
        ).fetchall()
    assert left == []
