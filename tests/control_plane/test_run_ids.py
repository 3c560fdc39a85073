"""A run's id is made by the database in time order (migration 0030): a version-7 UUID whose first
48 bits are the millisecond it was made, so a night's new runs go to the last pages of the indexes
on run ids instead of one random leaf page each, among a year of history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import psycopg


def _millisecond(run_id: UUID) -> datetime:
    return datetime.fromtimestamp(int.from_bytes(run_id.bytes[:6], "big") / 1000, UTC)


def test_runs_get_version_7_ids_in_the_order_they_were_made(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        org = conn.execute("INSERT INTO orgs (name) VALUES ('Acme') RETURNING id").fetchone()
        assert org is not None
        agent = conn.execute(
            "INSERT INTO agents (org_id, name) VALUES (%s, 'web-01') RETURNING id", [org[0]]
        ).fetchone()
        assert agent is not None
        before = datetime.now(UTC)
        ids: list[UUID] = []
        for _ in range(3):
            row = conn.execute(
                "INSERT INTO runs (agent_id, org_id, trigger, status, created_at)"
                " VALUES (%s, %s, 'manual', 'succeeded', now()) RETURNING id",
                [agent[0], org[0]],
            ).fetchone()
            assert row is not None
            ids.append(row[0])
            conn.execute("SELECT pg_sleep(0.002)")
        after = datetime.now(UTC)
    assert [run_id.version for run_id in ids] == [7, 7, 7]
    assert [run_id.variant for run_id in ids] == ["specified in RFC 4122"] * 3
    assert ids == sorted(ids) and len(set(ids)) == 3
    for run_id in ids:
        # The server's clock and this process's are the same machine's.
        slack = timedelta(milliseconds=5)
        assert before - slack <= _millisecond(run_id) <= after + slack
