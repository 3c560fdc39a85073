"""What a statement notes in the change feed (`answer_changes`), for the migrations' tests."""

from __future__ import annotations

import psycopg

Conn = psycopg.Connection[tuple[object, ...]]


def changes_noted(conn: Conn, statement: str, *params: object) -> set[object]:
    """The (scope, subject) rows `statement` added to the feed."""
    (last,) = conn.execute("SELECT coalesce(max(id), 0) FROM answer_changes").fetchone() or (0,)
    conn.execute(statement, params)
    rows = conn.execute(
        "SELECT scope, subject::text FROM answer_changes WHERE id > %s", [last]
    ).fetchall()
    return set(rows)


def an_agent(conn: Conn, name: str = "web-01") -> str:
    """A new organisation's one agent; its id."""
    org = conn.execute("INSERT INTO orgs (name) VALUES ('Acme') RETURNING id").fetchone()
    assert org is not None
    agent = conn.execute(
        "INSERT INTO agents (org_id, name) VALUES (%s, %s) RETURNING id::text", [org[0], name]
    ).fetchone()
    assert agent is not None
    return str(agent[0])
