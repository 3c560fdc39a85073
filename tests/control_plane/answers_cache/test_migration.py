"""Migration 0011 follows revision 0010's tables (holds, pins, canaries, halts, rollout
settings), and its downgrade takes every trigger it made away."""

from __future__ import annotations

import psycopg

from control_plane import migrate
from tests.control_plane.answers_cache.change_feed import changes_noted

# Revision 0010's tables (rollout, pins, holds) and the triggers 0011 puts on them.
FOLLOWED = {
    ("holds", "holds_answer_change_agent"),
    ("canary_agents", "canary_agents_answer_change_agent"),
    ("pins", "pins_answer_change_agent"),
    ("pins", "pins_answer_change_org"),
    ("release_halts", "release_halts_answer_change_all"),
    ("rollout_settings", "rollout_settings_answer_change_all"),
}


def _followed(conn: psycopg.Connection[tuple[object, ...]]) -> set[tuple[object, ...]]:
    rows = conn.execute(
        "SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
        " WHERE t.tgname LIKE '%%answer_change%%'"
        " AND c.relname IN ('holds', 'canary_agents', 'pins', 'release_halts', 'rollout_settings')"
    ).fetchall()
    return {tuple(row) for row in rows}


def test_revision_0010s_tables_are_followed(empty_database_url: str) -> None:
    migrate.upgrade(empty_database_url)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        assert _followed(conn) == FOLLOWED
        settings = changes_noted(conn, "UPDATE rollout_settings SET canary_share_percent = 1")
        assert settings == {("all", None)}
    migrate.downgrade(empty_database_url, "0010_rollout_pins_halts")
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        left = conn.execute(
            "SELECT tgname FROM pg_trigger WHERE tgname LIKE '%answer_change%'"
        ).fetchall()
        assert left == []
        assert conn.execute("SELECT to_regclass('answer_changes')").fetchone() == (None,)
