"""Every endpoint against every wrong credential: 401 for none or an unknown one, 403 for another
audience's, 404 for another organisation's objects — never their data, never a 500."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import psycopg
import pytest

from control_plane.accounts.credentials import Audience
from control_plane.registry import Services
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease
from tests.worlds.clocks import ManualClock


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str  # `{agent_id}` is the victim organisation's agent
    audience: Audience
    body: Any = None


ENDPOINTS = [
    Endpoint("GET", "/v1/agents", Audience.PANEL),
    Endpoint("GET", "/v1/agents/{agent_id}", Audience.PANEL),
    Endpoint(
        "PUT",
        "/v1/agents/{agent_id}/schedule",
        Audience.PANEL,
        {"enabled": False, "times": []},
    ),
    Endpoint("GET", "/v1/agents/{agent_id}/runs", Audience.PANEL),
    Endpoint("GET", "/v1/agents/{agent_id}/events", Audience.PANEL),
    Endpoint("POST", "/v1/agents/{agent_id}/update", Audience.PANEL),
    Endpoint("GET", "/v1/operations", Audience.PANEL),
    Endpoint("GET", "/v1/agent/config", Audience.AGENT),
    Endpoint("POST", "/v1/agent/claims", Audience.AGENT, {"slot_key": "2026-11-30T03:00"}),
    Endpoint(
        "POST",
        "/v1/agent/runs",
        Audience.AGENT,
        {"slot_key": "2026-11-30T03:00", "status": "up_to_date"},
    ),
    Endpoint("PATCH", "/v1/agent/runs/{run_id}", Audience.AGENT, {"status": "succeeded"}),
    Endpoint("GET", "/v1/agent/runs/{run_id}/artifact", Audience.AGENT),
    Endpoint("GET", "/v1/admin/settings", Audience.OPERATOR),
    Endpoint("PUT", "/v1/admin/settings", Audience.OPERATOR, {"org_cap": 1}),
    Endpoint("GET", "/v1/admin/brake", Audience.OPERATOR),
    Endpoint("PUT", "/v1/admin/brake", Audience.OPERATOR, {"engaged": True, "reason": "incident"}),
    Endpoint("POST", "/v1/admin/tokens/{token_id}/revoke", Audience.OPERATOR),
    Endpoint(
        "POST",
        "/v1/admin/releases",
        Audience.OPERATOR,
        {"manifest_b64": "", "signature_b64": "", "artifact_b64": ""},
    ),
    Endpoint("GET", "/v1/admin/releases", Audience.OPERATOR),
    Endpoint(
        "POST", "/v1/admin/releases/{release_id}/withdraw", Audience.OPERATOR, {"reason": "bad"}
    ),
]
ENDPOINT_PARAMS = [
    pytest.param(endpoint, id=f"{endpoint.method}_{endpoint.path}") for endpoint in ENDPOINTS
]


@dataclass(frozen=True)
class World:
    victim: Org
    victim_agent: Agent
    other: Org
    other_agent: Agent
    operator_key: str
    run_id: str
    token_id: str

    def key_for(self, audience: Audience) -> str:
        return {
            Audience.PANEL: self.victim.panel_key,
            Audience.AGENT: self.victim_agent.agent_key,
            Audience.OPERATOR: self.operator_key,
        }[audience]


@pytest.fixture
def world(
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    operator_key: str,
    services: Services,
    clock: ManualClock,
    published: SignedRelease,
) -> World:
    victim = make_org("Victim")
    other = make_org("Other")
    victim_agent = make_agent(victim, "victim-01")
    # The victim agent holds a claimed run with a token.
    clock.set(datetime(2026, 11, 30, 2, 1, tzinfo=UTC))
    claim = services.claims.claim_slot(
        UUID(victim_agent.agent_id), "2026-11-30T03:00", "1.4.1", clock.now()
    )
    return World(
        victim=victim,
        victim_agent=victim_agent,
        other=other,
        other_agent=make_agent(other, "other-01"),
        operator_key=operator_key,
        run_id=str(claim.grant.run_id),
        token_id=str(claim.grant.token.id),
    )


def _call(api: Api, endpoint: Endpoint, world: World, headers: dict[str, str]) -> Any:
    path = endpoint.path.format(
        agent_id=world.victim_agent.agent_id,
        run_id=world.run_id,
        token_id=world.token_id,
        release_id="00000000-0000-0000-0000-000000000000",
    )
    with api.client() as client:
        return client.request(endpoint.method, path, json=endpoint.body, headers=headers)


def _state(database_url: str) -> Any:
    """Everything a request could change (agents' last_seen_at aside: being seen is not data)."""
    with psycopg.connect(database_url) as conn:
        return conn.execute(
            "SELECT (SELECT json_agg(a ORDER BY id) FROM (SELECT id, update_schedule_enabled,"
            " update_schedule_times, current_version FROM agents) a),"
            " (SELECT row_to_json(s) FROM platform_settings s),"
            " (SELECT row_to_json(b) FROM platform_brake b),"
            " (SELECT json_agg(r ORDER BY id) FROM runs r),"
            " (SELECT json_agg(t ORDER BY id) FROM tokens t),"
            " (SELECT count(*) FROM releases), (SELECT count(*) FROM events)"
        ).fetchone()


@pytest.mark.parametrize("endpoint", ENDPOINT_PARAMS)
@pytest.mark.parametrize(
    "authorization",
    [
        pytest.param(None, id="none"),
        pytest.param("Bearer", id="empty_bearer"),
        pytest.param("Basic dXNlcjpwYXNz", id="basic_auth"),
        pytest.param("Bearer nwp_unknown-secret-0000000000000000000000000", id="unknown"),
    ],
)
def test_missing_or_unknown_credential_gets_401(
    api: Api, world: World, database_url: str, endpoint: Endpoint, authorization: str | None
) -> None:
    before = _state(database_url)
    headers = {"Authorization": authorization} if authorization else {}
    response = _call(api, endpoint, world, headers)
    assert response.status_code == 401
    assert "detail" in response.json()
    assert _state(database_url) == before


@pytest.mark.parametrize("endpoint", ENDPOINT_PARAMS)
def test_revoked_credential_gets_401(
    api: Api, world: World, database_url: str, endpoint: Endpoint
) -> None:
    with psycopg.connect(database_url) as conn:
        conn.execute("UPDATE credentials SET revoked_at = now()")
    key = world.key_for(endpoint.audience)
    response = _call(api, endpoint, world, {"Authorization": f"Bearer {key}"})
    assert response.status_code == 401


@pytest.mark.parametrize(
    ("endpoint", "wrong"),
    [
        pytest.param(endpoint, wrong, id=f"{wrong.value}_on_{endpoint.method}_{endpoint.path}")
        for endpoint in ENDPOINTS
        for wrong in Audience
        if wrong is not endpoint.audience
    ],
)
def test_another_audiences_credential_gets_403(
    api: Api, world: World, database_url: str, endpoint: Endpoint, wrong: Audience
) -> None:
    before = _state(database_url)
    key = world.key_for(wrong)
    response = _call(api, endpoint, world, {"Authorization": f"Bearer {key}"})
    assert response.status_code == 403
    assert _state(database_url) == before


@pytest.mark.parametrize(
    "endpoint",
    [
        pytest.param(endpoint, id=f"{endpoint.method}_{endpoint.path}")
        for endpoint in ENDPOINTS
        if "{agent_id}" in endpoint.path
    ],
)
def test_another_organisations_agent_gets_404(
    api: Api, world: World, database_url: str, endpoint: Endpoint
) -> None:
    before = _state(database_url)
    response = _call(api, endpoint, world, {"Authorization": f"Bearer {world.other.panel_key}"})
    assert response.status_code == 404
    assert world.victim_agent.agent_id in response.json()["detail"]["message"]
    assert "victim" not in response.text
    assert _state(database_url) == before


@pytest.mark.parametrize(
    "endpoint",
    [
        pytest.param(endpoint, id=f"{endpoint.method}_{endpoint.path}")
        for endpoint in ENDPOINTS
        if "{run_id}" in endpoint.path
    ],
)
def test_another_agents_run_gets_404(
    api: Api, world: World, database_url: str, endpoint: Endpoint
) -> None:
    before = _state(database_url)
    response = _call(
        api, endpoint, world, {"Authorization": f"Bearer {world.other_agent.agent_key}"}
    )
    assert response.status_code == 404
    assert _state(database_url) == before


def test_agent_list_shows_only_the_callers_organisation(api: Api, world: World) -> None:
    with api.client(world.other.panel_key) as client:
        listed = client.get("/v1/agents").json()["agents"]
    assert [agent["name"] for agent in listed] == ["other-01"]


def test_agent_config_is_the_callers_own(api: Api, world: World) -> None:
    with api.client(world.other_agent.agent_key) as client:
        config = client.get("/v1/agent/config").json()
    assert config["agent_id"] == world.other_agent.agent_id
    assert config["org_id"] == world.other.org_id
