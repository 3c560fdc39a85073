"""A small fleet for the reconcile tests: organisations and agents through the real services, run
rows as the claim and outcome endpoints leave them, and passes of the real worker.

Times: the platform zone is Europe/Amsterdam (UTC+1 in winter), so the slot "2026-11-30T03:00"
runs at 02:00Z and its 15-minute window closes at 02:15Z.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from control_plane.notifications.delivery import DeliveryPolicy, WebhookSender
from control_plane.reconcile.passes import PassReport, PassSettings, ReconcilePass
from control_plane.registry import Services
from control_plane.types import Pool
from tests.worlds.clocks import ManualClock

NIGHT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)  # 03:00 in Amsterdam
NIGHT_KEY = "2026-11-30T03:00"
AFTER_NIGHT = NIGHT + timedelta(minutes=20)  # window closed + the settle margin


@dataclass(frozen=True)
class FleetAgent:
    id: UUID
    org_id: UUID
    name: str


class Fleet:
    def __init__(self, pool: Pool, services: Services, clock: ManualClock) -> None:
        self.pool = pool
        self.services = services
        self.clock = clock
        self.sender = WebhookSender(
            pool,
            DeliveryPolicy(max_attempts=3, first_backoff=timedelta(minutes=1)),
            addresses=services.webhook_policy,
        )
        self._pass = ReconcilePass(
            pool, sender=self.sender, settings=PassSettings(), identity="tests"
        )

    def close(self) -> None:
        self.sender.close()

    def org(self, name: str = "Acme") -> UUID:
        return self.services.accounts.create_org(name, now=self.clock.now()).org_id

    def agent(self, org_id: UUID, name: str, *, times: list[str] | None = None) -> FleetAgent:
        issued = self.services.accounts.enroll_agent(org_id, name, now=self.clock.now())
        if times is not None:
            self.sql(
                "UPDATE agents SET update_schedule_times = %s WHERE id = %s",
                [Jsonb(times), issued.agent_id],
            )
        return FleetAgent(id=issued.agent_id, org_id=org_id, name=name)

    def disable(self, agent: FleetAgent) -> None:
        self.sql("UPDATE agents SET update_schedule_enabled = false WHERE id = %s", [agent.id])

    def seen(self, agent: FleetAgent, at: datetime) -> None:
        self.sql("UPDATE agents SET last_seen_at = %s WHERE id = %s", [at, agent.id])

    def run(
        self,
        agent: FleetAgent,
        status: str,
        *,
        slot_key: str = NIGHT_KEY,
        slot_at: datetime = NIGHT,
        version: str | None = None,
        error: str | None = None,
        reason: str | None = None,
        trigger: str = "schedule",
    ) -> UUID:
        """A run row as the claim/outcome endpoints leave it (scheduled) or a manual update."""
        scheduled = trigger == "schedule"
        row = self.one(
            "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, version,"
            " error, outcome_reason, created_at, claimed_at, finished_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            [
                agent.id,
                agent.org_id,
                trigger,
                slot_key if scheduled else None,
                slot_at if scheduled else None,
                status,
                version,
                error,
                reason,
                slot_at + timedelta(minutes=1),
                slot_at + timedelta(minutes=1),
                None if status == "claimed" else slot_at + timedelta(minutes=5),
            ],
        )
        run_id: UUID = row["id"]
        return run_id

    def finish(self, run_id: UUID, status: str, version: str | None = None) -> None:
        self.sql(
            "UPDATE runs SET status = %s, version = %s, finished_at = %s WHERE id = %s",
            [status, version, self.clock.now(), run_id],
        )

    def reconcile(self, at: datetime | None = None) -> PassReport:
        """One pass of the worker at `at` (default: the test clock)."""
        if at is not None:
            self.clock.set(at)
        return self._pass.run(self.clock.now())

    def rounds_full(
        self, start: datetime, minutes: int, *, org_id: UUID | str | None = None
    ) -> None:
        """Fill the rounds of `minutes` minutes from `start` at a cap of 1 (caps are at least 1):
        the organisation's when `org_id` is given, else the platform's."""
        if org_id is None:
            self.services.settings.update({"org_cap": 1, "global_cap": 1})
        else:
            self.services.settings.update({"org_cap": 1})
        for minute in range(minutes):
            at = start.replace(second=0, microsecond=0) + timedelta(minutes=minute)
            if org_id is None:
                self.sql(
                    "INSERT INTO claim_rounds_global (round_start, granted) VALUES (%s, 1)", [at]
                )
            else:
                self.sql(
                    "INSERT INTO claim_rounds_org (round_start, org_id, granted)"
                    " VALUES (%s, %s, 1)",
                    [at, org_id],
                )

    def sql(self, statement: str, params: Any = None) -> None:
        with self.pool.connection() as conn:
            conn.execute(statement, params)

    def one(self, statement: str, params: Any = None) -> dict[str, Any]:
        with self.pool.connection() as conn:
            row = conn.execute(statement, params).fetchone()
        assert row is not None
        return row

    def rows(self, statement: str, params: Any = None) -> list[dict[str, Any]]:
        with self.pool.connection() as conn:
            return conn.execute(statement, params).fetchall()

    def missed(self) -> dict[str, str]:
        """Agent name → miss reason of every missed run."""
        return {
            row["name"]: row["miss_reason"]
            for row in self.rows(
                "SELECT a.name, r.miss_reason FROM runs r JOIN agents a ON a.id = r.agent_id"
                " WHERE r.status = 'missed'"
            )
        }

    def notifications(self, org_id: UUID) -> list[dict[str, Any]]:
        return self.rows(
            "SELECT id, slot_key, body FROM notifications WHERE org_id = %s ORDER BY slot_at",
            [org_id],
        )
