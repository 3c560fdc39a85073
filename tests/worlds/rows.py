"""Every row of some tables as JSON text, sorted: taken before and after a request or a command
that was refused, equal means it changed nothing there."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.rows import tuple_row

__all__ = ["rows_at", "rows_in"]


def rows_in(conn: psycopg.Connection[Any], tables: Sequence[str]) -> dict[str, list[str]]:
    """On an open connection (a pool's, whatever its row factory)."""
    cursor = conn.cursor(row_factory=tuple_row)
    return {
        table: sorted(
            str(row[0])
            for row in cursor.execute(f"SELECT row_to_json(t)::text FROM {table} t")  # noqa: S608
        )
        for table in tables
    }


def rows_at(database_url: str, tables: Sequence[str]) -> dict[str, list[str]]:
    """On a connection of its own to `database_url`."""
    with psycopg.connect(database_url) as conn:
        return rows_in(conn, tables)
