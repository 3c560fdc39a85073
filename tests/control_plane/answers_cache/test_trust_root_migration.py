"""Migration 0017: a trust root stored is a change of everything; the root an agent reports is
no change; its downgrade puts revision 0016's triggers back."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg

from control_plane import migrate

STORE_ROOT = (
    "INSERT INTO trust_roots (version, body, expires_at, published_at, published_by)"
    " VALUES (%s, '{}', '2030-01-01Z', '2026-01-01Z', 'tests')"
)


def _changes(
    conn: psycopg.Connection[tuple[object, ...]], statement: str, *params: object
) -> set[object]:
    (last,) = conn.execute("SELECT coalesce(max(id), 0) FROM answer_changes").fetchone() or (0,)
    conn.execute(statement, params)
    rows = conn.execute(
        "SELECT scope, subject::text FROM answer_changes WHERE id > %s", [last]
    ).fetchall()
    return set(rows)


def _agent(conn: psycopg.Connection[tuple[object, ...]]) -> str:
    org = conn.execute("INSERT INTO orgs (name) VALUES ('Acme') RETURNING id").fetchone()
    assert org is not None
    agent = conn.execute(
        "INSERT INTO agents (org_id, name) VALUES (%s, 'web-01') RETURNING id::text", [org[0]]
    ).fetchone()
    assert agent is not None
    return str(agent[0])


def test_a_stored_root_changes_every_answer_and_a_reported_one_none(
    empty_database_url: str,
) -> None:
    migrate.upgrade(empty_database_url)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        agent = _agent(conn)
        assert _changes(conn, STORE_ROOT, 1) == {("all", None)}
        held = "UPDATE agents SET trust_root_version = %s WHERE id = %s"
        assert _changes(conn, held, 1, agent) == set()
        seen = "UPDATE agents SET last_seen_at = %s, trust_root_version = 2 WHERE id = %s"
        assert _changes(conn, seen, datetime(2026, 11, 30, tzinfo=UTC), agent) == set()
        renamed = "UPDATE agents SET name = 'web-02' WHERE id = %s"
        assert _changes(conn, renamed, agent) == {("agent", agent)}

    migrate.downgrade(empty_database_url, "0016_trust_roots")
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        assert _changes(conn, STORE_ROOT, 2) == set()
        held = "UPDATE agents SET trust_root_version = 3 WHERE id = %s"
        assert _changes(conn, held, agent) == {("agent", agent)}
