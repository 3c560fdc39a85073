"""The enrollment tests' world: an organisation, an operator, the API over real HTTP, and what a
refusal must leave unchanged (agents, their credentials, the tokens' spent uses)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import UUID

import httpx
import pytest

from control_plane.enrollment.rules import TokenTerms
from control_plane.enrollment.services import IssuedEnrollmentToken
from control_plane.events.trail import Actor
from control_plane.registry import Services
from control_plane.types import Pool
from ground.contract import ENROLL_PATH
from tests.control_plane.conftest import Api, Org
from tests.worlds.clocks import ManualClock


@dataclass(frozen=True)
class Footprint:
    """What an exchange may change: a refusal leaves all of it as it was."""

    agents: int
    agent_credentials: int
    uses: dict[UUID, int]


@dataclass(frozen=True)
class Enrollment:
    api: Api
    services: Services
    clock: ManualClock
    pool: Pool
    org: Org
    operator_key: str

    def token(self, **terms: Any) -> IssuedEnrollmentToken:
        """A token of the world's organisation, made by an operator at the command line."""
        return self.services.enrollment.create(
            UUID(self.org.org_id),
            TokenTerms(**terms),
            now=self.clock.now(),
            actor=Actor(kind="operator", name="cli:tests"),
        )

    def enroll(self, secret: str | None, name: str = "web-01") -> httpx.Response:
        with self.api.client(secret) as host:
            return host.post(ENROLL_PATH, json={"name": name})

    def footprint(self) -> Footprint:
        with self.pool.connection() as conn:
            agents = conn.execute("SELECT count(*) AS n FROM agents").fetchone()
            keys = conn.execute(
                "SELECT count(*) AS n FROM credentials WHERE audience = 'agent'"
            ).fetchone()
            uses = conn.execute("SELECT id, uses FROM enrollment_tokens").fetchall()
        assert agents is not None and keys is not None
        return Footprint(
            agents=agents["n"],
            agent_credentials=keys["n"],
            uses={row["id"]: row["uses"] for row in uses},
        )

    def events(self, kind: str) -> list[dict[str, Any]]:
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT org_id, agent_id, actor_kind, actor_name, data FROM events"
                " WHERE kind = %s ORDER BY id",
                [kind],
            ).fetchall()
        return [dict(row) for row in rows]

    def later(self, **delta: float) -> None:
        self.clock.set(self.clock.now() + timedelta(**delta))


@pytest.fixture
def world(
    api: Api,
    services: Services,
    clock: ManualClock,
    pool: Pool,
    make_org: Callable[..., Org],
    operator_key: str,
) -> Enrollment:
    return Enrollment(
        api=api,
        services=services,
        clock=clock,
        pool=pool,
        org=make_org("Acme"),
        operator_key=operator_key,
    )
