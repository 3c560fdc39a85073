"""A migration whose new rule the rows already there break fails with those rows named.

`people_live_address` (rev0042) is a unique index on an address with A-Z folded: a database whose
collation folded letters otherwise (a Turkish one, where `I` is not `i`) could hold two live people
it tells apart. The migration cannot choose between them: it stops, names the duplicated address,
and leaves the schema and both rows as they were.
"""

from __future__ import annotations

import subprocess
import sys

import psycopg
import pytest

from control_plane import migrate
from control_plane.errors import DatabaseUnavailable

BEFORE_ADDRESS_KEY = "0041_sign_in_failures"
PEOPLE = "SELECT email FROM people ORDER BY email"


def _twins(database_url: str) -> None:
    """Two live operators the old index, under a collation like the Turkish one, let through
    (here the old index is dropped: the embedded server has no such collation)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DROP INDEX people_live_email")
        conn.execute(
            "INSERT INTO people (name, email, role, created_at)"
            " VALUES ('Ada', 'ADMIN@example.com', 'operator', now()),"
            " ('Bo', 'admin@example.com', 'operator', now())"
        )


def _revision(database_url: str) -> str:
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    assert row is not None
    return str(row[0])


def test_rows_that_break_a_new_unique_rule_are_named_and_nothing_changes(
    empty_database_url: str,
) -> None:
    migrate.upgrade(empty_database_url, BEFORE_ADDRESS_KEY)
    _twins(empty_database_url)
    with psycopg.connect(empty_database_url) as conn:
        before = conn.execute(PEOPLE).fetchall()

    with pytest.raises(DatabaseUnavailable) as refused:
        migrate.upgrade(empty_database_url)

    message = str(refused.value)
    assert message.startswith(
        'migration failed: could not create unique index "people_live_address"'
    )
    assert "=(admin@example.com) is duplicated" in message
    assert "the upgrade notes of this release say which rows and what to do" in message
    assert _revision(empty_database_url) == BEFORE_ADDRESS_KEY
    with psycopg.connect(empty_database_url) as conn:
        assert conn.execute(PEOPLE).fetchall() == before


def test_the_command_says_it_in_one_line(empty_database_url: str) -> None:
    migrate.upgrade(empty_database_url, BEFORE_ADDRESS_KEY)
    _twins(empty_database_url)
    result = subprocess.run(
        [sys.executable, "-m", "nachtwacht.cli", "control", "migrate"],
        env={"NACHTWACHT_DATABASE_URL": empty_database_url, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "(admin@example.com) is duplicated" in lines[0]
