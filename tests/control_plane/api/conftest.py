"""The API tests' worlds, set up once: an enrolled agent and its raw requests (`agent_requests`,
for the attack tests), and the rollout tests' (`test_rollout*.py`): a stable pair with two
releases, an operator and the calls every rollout test makes, so each test says only what differs.

The 03:00 slot of 2026-11-30 in Europe/Amsterdam (CET) is 02:00 UTC; its window closes at 02:15.
The next night's is 2026-12-01T02:00Z.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.registry import Services
from control_plane.types import Pool
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease, sign_release
from tests.worlds.clocks import ManualClock

SLOT = "2026-11-30T03:00"
NEXT_SLOT = "2026-12-01T03:00"
AT_0301 = datetime(2026, 11, 30, 2, 1, 15, tzinfo=UTC)
ROLLOUT_SETTINGS = "/v1/admin/rollout/settings"
# Stable 1.5.0 (everyone), then 1.6.0 (canary): what the `two_releases` fixture published.
TwoReleases = tuple[SignedRelease, SignedRelease]


# A raw header saying the body is JSON.
JSON = (b"content-type", b"application/json")
# The instant `agent_requests` sets: the 03:00 slot of 2026-11-30 has just opened.
AT_0301_SHARP = datetime(2026, 11, 30, 2, 1, tzinfo=UTC)


@dataclass(frozen=True)
class AgentRequests:
    """An enrolled agent of its own organisation (release 1.5.0 published), and its requests
    over real HTTP with the headers exactly as given: raw bytes, in order, repeated if repeated."""

    api: Api
    org: Org
    agent: Agent

    def send(
        self,
        method: str,
        path: str,
        headers: Sequence[tuple[bytes, bytes]] = (),
        content: bytes | None = None,
        *,
        with_key: bool = True,
    ) -> httpx.Response:
        """`path` with its query; the agent's key first unless `with_key` is False (then only
        `headers` are sent)."""
        key = [(b"authorization", f"Bearer {self.agent.agent_key}".encode())] if with_key else []
        request = httpx.Request(
            method, f"{self.api.base_url}{path}", headers=[*key, *headers], content=content
        )
        with httpx.Client(timeout=30) as client:
            return client.send(request)


@pytest.fixture
def agent_requests(
    api: Api,
    clock: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> AgentRequests:
    """An agent enrolled before the night, the clock then set to 03:01 Amsterdam (02:01 UTC)."""
    del published
    org = make_org()
    agent = make_agent(org)
    clock.set(AT_0301_SHARP)
    return AgentRequests(api=api, org=org, agent=agent)


@pytest.fixture
def two_releases(
    services: Services, release_key: Ed25519PrivateKey, clock: ManualClock
) -> TwoReleases:
    """Stable 1.5.0 (the pair's first: everyone), then 1.6.0 (in its canary stage)."""
    old = sign_release(release_key, version="1.5.0", manifest_version=42)
    new = sign_release(release_key, version="1.6.0", manifest_version=43)
    for release in (old, new):
        services.releases.publish(
            release.manifest, release.signature, release.artifact, now=clock.now()
        )
    return old, new


@dataclass(frozen=True)
class Rollout:
    """The API, its services and clock, an operator's key, and the calls the rollout tests make
    over real HTTP: each returns the answer, for the test to judge."""

    api: Api
    services: Services
    clock: ManualClock
    operator_key: str
    pool: Pool
    make_org: Callable[..., Org]
    make_agent: Callable[..., Agent]

    def operator(self, method: str, path: str, **body: Any) -> httpx.Response:
        with self.api.client(self.operator_key) as operator:
            return operator.request(method, path, json=body or None)

    def settings(self, **fields: Any) -> httpx.Response:
        """Change the rollout settings; a change the test relies on must be accepted."""
        answer = self.operator("PATCH", ROLLOUT_SETTINGS, **fields)
        assert answer.status_code == 200, answer.text
        return answer

    def release_id(self, version: str) -> str:
        for track in self.services.releases.list().tracks:
            for entry in track.releases:
                if entry.version == version:
                    return str(entry.id)
        raise AssertionError(f"no release {version}")

    def promote(self, version: str, reason: str = "canaries fine") -> httpx.Response:
        return self.operator(
            "POST", f"/v1/admin/releases/{self.release_id(version)}/promote", reason=reason
        )

    def mark_canary(self, agent: Agent) -> httpx.Response:
        return self.operator("PUT", f"/v1/admin/agents/{agent.agent_id}/canary", canary=True)

    def claim(
        self, agent: Agent, slot: str = SLOT, from_version: str | None = "1.5.0", **extra: Any
    ) -> httpx.Response:
        body: dict[str, Any] = {"slot_key": slot, **extra}
        if from_version is not None:
            body["from_version"] = from_version
        with self.api.client(agent.agent_key) as client:
            return client.post("/v1/agent/claims", json=body)

    def request_manual(self, org: Org, agent: Agent) -> str:
        """The customer asks for an update now (the panel); the run's id."""
        with self.api.client(org.panel_key) as panel:
            requested = panel.post(f"/v1/agents/{agent.agent_id}/update")
        assert requested.status_code in (200, 202), requested.text
        run_id: str = requested.json()["run_id"]
        return run_id

    def claim_manual(self, agent: Agent, run_id: str) -> httpx.Response:
        with self.api.client(agent.agent_key) as client:
            return client.post("/v1/agent/claims", json={"manual_run_id": run_id})

    def report(
        self, agent: Agent, run_id: str, status: str, version: str, reason: str | None = None
    ) -> None:
        body = {"status": status, "version": version}
        if reason is not None:
            body["reason"] = reason
        with self.api.client(agent.agent_key) as client:
            answer = client.patch(f"/v1/agent/runs/{run_id}", json=body)
        assert answer.status_code == 200, answer.text

    def granted_to_everyone(self, count: int) -> list[tuple[Agent, str]]:
        """1.6.0 promoted to everyone and claimed at 03:01 by `count` agents of one organisation
        (the caps wide enough for all): each agent with its run's id."""
        assert self.promote("1.6.0").status_code == 200
        org = self.make_org()
        self.clock.set(AT_0301)
        self.operator("PUT", "/v1/admin/settings", org_cap=25, global_cap=25)
        agents = [self.make_agent(org, f"web-{n:02d}") for n in range(count)]
        return [(agent, self.claim(agent, from_version=None).json()["run_id"]) for agent in agents]

    def only_event(self, kind: str) -> dict[str, Any]:
        """The one event of `kind` in the trail (its actor and data)."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT actor_kind, data FROM events WHERE kind = %s", [kind]
            ).fetchall()
        assert len(rows) == 1, rows
        return dict(rows[0])

    def config(self, agent: Agent) -> dict[str, Any]:
        with self.api.client(agent.agent_key) as client:
            answer = client.get("/v1/agent/config")
        assert answer.status_code == 200
        body: dict[str, Any] = answer.json()
        return body


@pytest.fixture
def rollout(
    api: Api,
    services: Services,
    clock: ManualClock,
    operator_key: str,
    pool: Pool,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> Rollout:
    return Rollout(
        api=api,
        services=services,
        clock=clock,
        operator_key=operator_key,
        pool=pool,
        make_org=make_org,
        make_agent=make_agent,
    )


@pytest.fixture
def no_share(rollout: Rollout) -> None:
    """Only the agents an operator marks are canaries (the share is 0%)."""
    rollout.settings(canary_share_percent=0)
