"""Migration 0017: a trust root stored is a change of everything; the root an agent reports is
no change; its downgrade puts revision 0016's triggers back."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg

from control_plane import migrate
from tests.control_plane.answers_cache.change_feed import an_agent, changes_noted

STORE_ROOT = (
    "INSERT INTO trust_roots (version, body, expires_at, published_at, published_by)"
    " VALUES (%s, '{}', '2030-01-01Z', '2026-01-01Z', 'tests')"
)


def test_a_stored_root_changes_every_answer_and_a_reported_one_none(
    empty_database_url: str,
) -> None:
    migrate.upgrade(empty_database_url)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        agent = an_agent(conn)
        assert changes_noted(conn, STORE_ROOT, 1) == {("all", None)}
        held = "UPDATE agents SET trust_root_version = %s WHERE id = %s"
        assert changes_noted(conn, held, 1, agent) == set()
        seen = "UPDATE agents SET last_seen_at = %s, trust_root_version = 2 WHERE id = %s"
        assert changes_noted(conn, seen, datetime(2026, 11, 30, tzinfo=UTC), agent) == set()
        renamed = "UPDATE agents SET name = 'web-02' WHERE id = %s"
        assert changes_noted(conn, renamed, agent) == {("agent", agent)}

    migrate.downgrade(empty_database_url, "0016_trust_roots")
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        assert changes_noted(conn, STORE_ROOT, 2) == set()
        held = "UPDATE agents SET trust_root_version = 3 WHERE id = %s"
        assert changes_noted(conn, held, agent) == {("agent", agent)}
