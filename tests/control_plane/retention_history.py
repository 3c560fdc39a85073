"""A small history, old and young, for the retention tests: rows as the product writes them,
seeded with SQL at chosen ages, and a picture of every table to compare before and after."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from control_plane.types import Connection, Pool

# Tables the walk adds to as bookkeeping: its progress row, and the answers' change feed (a
# removed run or token is written there, as every change to those tables is; it is pruned).
BOOKKEEPING = frozenset({"retention_progress", "answer_changes"})


def picture(conn: Connection) -> dict[str, Counter[str]]:
    """Every row of every table, as text, counted (a table may hold equal rows)."""
    tables = [
        row["table_name"]
        for row in conn.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name"
        ).fetchall()
    ]
    return {
        table: Counter(
            row["r"]
            for row in conn.execute(
                f'SELECT to_jsonb(t)::text AS r FROM "{table}" t'  # noqa: S608 - catalogue names
            ).fetchall()
        )
        for table in tables
    }


def removed_rows(
    before: dict[str, Counter[str]], after: dict[str, Counter[str]]
) -> dict[str, Counter[str]]:
    return {table: before[table] - after.get(table, Counter()) for table in before}


@dataclass
class Seeded:
    """The ids the walk must remove, and the ones it must keep, by table."""

    removed_runs: set[UUID] = field(default_factory=set)
    kept_runs: set[UUID] = field(default_factory=set)
    removed_events: set[int] = field(default_factory=set)
    kept_events: set[int] = field(default_factory=set)
    removed_notifications: set[UUID] = field(default_factory=set)
    kept_notifications: set[UUID] = field(default_factory=set)


class History:
    def __init__(self, pool: Pool, now: datetime, release_id: UUID) -> None:
        self.pool = pool
        self.now = now
        self.release_id = release_id
        self.seeded = Seeded()

    def ago(self, days: float) -> datetime:
        return self.now - timedelta(days=days)

    def _one(self, statement: str, params: Any) -> dict[str, Any]:
        with self.pool.connection() as conn:
            row = conn.execute(statement, params).fetchone()
        assert row is not None
        return row

    def run(
        self,
        agent_id: UUID,
        org_id: UUID,
        *,
        days_ago: float,
        status: str = "succeeded",
        version: str | None = "1.5.0",
        trigger: str = "schedule",
        events: int = 2,
        expect_removed: bool,
    ) -> UUID:
        """A run with its token and its `events` events (scheduled, then its ending)."""
        at = self.ago(days_ago)
        scheduled = trigger == "schedule"
        in_flight = status in ("requested", "claimed")
        slot_key = at.strftime("%Y-%m-%dT%H:%M") if scheduled else None
        run_id: UUID = self._one(
            "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, release_id,"
            " version, created_at, claimed_at, finished_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            [
                agent_id,
                org_id,
                trigger,
                slot_key,
                at if scheduled else None,
                status,
                self.release_id,
                None if in_flight else version,
                at,
                None if status == "requested" else at,
                None if in_flight else at + timedelta(minutes=4),
            ],
        )["id"]
        if status != "requested":
            with self.pool.connection() as conn:
                conn.execute(
                    "INSERT INTO tokens (run_id, agent_id, release_id, granted_at, expires_at)"
                    " VALUES (%s, %s, %s, %s, %s)",
                    [run_id, agent_id, self.release_id, at, at + timedelta(minutes=30)],
                )
        kinds = ["update.scheduled", f"update.{status}", "update.confirmed", "update.note"]
        for index in range(events):
            event_id = self.event(
                org_id, agent_id, run_id, kinds[index % len(kinds)], days_ago=days_ago
            )
            (self.seeded.removed_events if expect_removed else self.seeded.kept_events).add(
                event_id
            )
        (self.seeded.removed_runs if expect_removed else self.seeded.kept_runs).add(run_id)
        return run_id

    def event(
        self,
        org_id: UUID,
        agent_id: UUID | None,
        run_id: UUID | None,
        kind: str,
        *,
        days_ago: float,
        actor_kind: str = "schedule",
    ) -> int:
        event_id: int = self._one(
            "INSERT INTO events (org_id, agent_id, run_id, kind, actor_kind, at, data)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
            [org_id, agent_id, run_id, kind, actor_kind, self.ago(days_ago), Jsonb({})],
        )["id"]
        return event_id

    def trail(self, org_id: UUID, kind: str, *, days_ago: float) -> int:
        """An action on the operators' trail: no run, kept forever."""
        event_id = self.event(org_id, None, None, kind, days_ago=days_ago, actor_kind="operator")
        self.seeded.kept_events.add(event_id)
        return event_id

    def notification(
        self, org_id: UUID, agent_id: UUID, *, days_ago: float, expect_removed: bool
    ) -> UUID:
        """A notification with its slot review, webhook delivery, attempt and agent mention."""
        at = self.ago(days_ago)
        slot_key = at.strftime("%Y-%m-%dT%H:%M")
        notification_id: UUID = self._one(
            "INSERT INTO notifications (org_id, slot_key, slot_at, created_at, body)"
            " VALUES (%s, %s, %s, %s, %s) RETURNING id",
            [org_id, slot_key, at, at, Jsonb({"failed": 1})],
        )["id"]
        with self.pool.connection() as conn:
            conn.execute(
                "INSERT INTO slot_reviews (org_id, slot_key, slot_at, decided_at, notification_id)"
                " VALUES (%s, %s, %s, %s, %s)",
                [org_id, slot_key, at, at, notification_id],
            )
            conn.execute(
                "INSERT INTO webhook_deliveries (notification_id, org_id, state, attempts,"
                " delivered_at) VALUES (%s, %s, 'delivered', 1, %s)",
                [notification_id, org_id, at],
            )
            conn.execute(
                "INSERT INTO webhook_attempts (notification_id, attempt, at, url, status_code,"
                " outcome) VALUES (%s, 1, %s, 'https://hooks.example/n', 200, 'delivered')",
                [notification_id, at],
            )
            conn.execute(
                "INSERT INTO agent_mentions (agent_id, local_day, kind, notification_id)"
                " VALUES (%s, %s, 'failure', %s)",
                [agent_id, at.date(), notification_id],
            )
        (
            self.seeded.removed_notifications if expect_removed else self.seeded.kept_notifications
        ).add(notification_id)
        return notification_id

    def refusal(self, agent_id: UUID, *, days_ago: float) -> None:
        at = self.ago(days_ago)
        with self.pool.connection() as conn:
            conn.execute(
                "INSERT INTO claim_refusals (agent_id, slot_key, reason, first_at)"
                " VALUES (%s, %s, 'org_cap', %s)",
                [agent_id, at.strftime("%Y-%m-%dT%H:%M"), at],
            )

    def unreachable(self, agent_id: UUID, *, days_ago: float) -> None:
        """The agent's report that it could not reach the control plane in a slot's window."""
        at = self.ago(days_ago).replace(second=0, microsecond=0)
        with self.pool.connection() as conn:
            conn.execute(
                "INSERT INTO unreachable_reports (agent_id, slot_key, slot_at, error,"
                " first_tried_at, last_tried_at, attempts, reported_at)"
                " VALUES (%s, %s, %s, 'cannot connect', %s, %s, 3, %s)",
                [
                    agent_id,
                    at.strftime("%Y-%m-%dT%H:%M"),
                    at,
                    at,
                    at + timedelta(minutes=2),
                    at + timedelta(hours=1),
                ],
            )

    def round(self, org_id: UUID, *, days_ago: float) -> None:
        at = self.ago(days_ago).replace(second=0, microsecond=0)
        with self.pool.connection() as conn:
            conn.execute(
                "INSERT INTO claim_rounds_org (round_start, org_id, granted) VALUES (%s, %s, 1)",
                [at, org_id],
            )
            conn.execute(
                "INSERT INTO claim_rounds_global (round_start, granted) VALUES (%s, 1)"
                " ON CONFLICT (round_start)"
                " DO UPDATE SET granted = claim_rounds_global.granted + 1",
                [at],
            )

    def halt_evidence(self, run_id: UUID, *, days_ago: float) -> None:
        with self.pool.connection() as conn:
            halt = conn.execute(
                "INSERT INTO release_halts (release_id, halted_at, cause, reason, halted_by,"
                " resumed_at, resumed_by, resume_reason)"
                " VALUES (%s, %s, 'errors', 'too many failures', 'rollout', %s, 'ops', 'fixed')"
                " RETURNING id",
                [self.release_id, self.ago(days_ago), self.ago(days_ago - 1)],
            ).fetchone()
            assert halt is not None
            conn.execute(
                "INSERT INTO release_halt_runs (halt_id, run_id, status) VALUES (%s, %s, 'failed')",
                [halt["id"], run_id],
            )
