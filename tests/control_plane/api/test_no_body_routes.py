"""Every route that defines no body refuses one (`control_plane/api/no_body.py`), as
`POST /v1/agent/manual-updates` does (`test_host_manual_update.py`): a client that sends a body
expects it to mean something, so answering as if it had been read would mislead it. Walked over
every POST, PUT, PATCH and DELETE operation of the OpenAPI document without a request body, with
its own audience's key, over real HTTP; and the destructive ones with real targets, to show that
nothing happened."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from control_plane.accounts.credentials import Audience
from control_plane.api.app import create_app
from control_plane.registry import Services
from control_plane.types import Pool
from ground.contract import CONFIG_PATH, MANUAL_UPDATES_PATH
from tests.control_plane.conftest import Agent, Api, Org
from tests.worlds.clocks import ManualClock

SOME_ID = "00000000-0000-4000-8000-000000000001"
BODY = b'{"agent_id": "another-agent", "reason": "by the way"}'
JSON = {"Content-Type": "application/json"}


def _bodiless_routes(services: Services, clock: ManualClock) -> list[tuple[str, str, Audience]]:
    found = []
    for path, operations in create_app(services, clock).openapi()["paths"].items():
        for method, operation in operations.items():
            if method not in {"post", "put", "patch", "delete"} or "requestBody" in operation:
                continue
            schemes = {name for entry in operation.get("security", []) for name in entry}
            (scheme,) = schemes
            found.append((method.upper(), re.sub(r"\{[^}]+\}", SOME_ID, path), Audience(scheme)))
    return found


def _refused_for_its_body(answer: Any, method: str, path: str) -> bool:
    if answer.status_code != 422:
        return False
    detail = answer.json()["detail"]
    return (
        detail["code"] == "invalid_request"
        and detail["field"] == "body"
        and f"expected no body: {method} {path} takes none" in detail["message"]
    )


def test_every_route_without_a_body_refuses_one_naming_it(
    api: Api,
    services: Services,
    clock: ManualClock,
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    org = make_org("Acme")
    keys = {
        Audience.OPERATOR: operator_key,
        Audience.PANEL: org.panel_key,
        Audience.AGENT: make_agent(org).agent_key,
    }
    routes = _bodiless_routes(services, clock)
    # The walk must see the routes it exists for: every audience's, and the one found first.
    assert {audience for _, _, audience in routes} == set(Audience)
    assert ("POST", MANUAL_UPDATES_PATH, Audience.AGENT) in routes
    assert len(routes) >= 14
    not_refused = []
    with api.client() as client:
        for method, path, audience in routes:
            headers = {**JSON, "Authorization": f"Bearer {keys[audience]}"}
            answer = client.request(method, path, content=BODY, headers=headers)
            if not _refused_for_its_body(answer, method, path):
                not_refused.append(f"{method} {path}: {answer.status_code} {answer.text[:200]}")
    assert not_refused == []


def _agent_state(pool: Pool, agent_id: str) -> dict[str, Any]:
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM agents WHERE id = %(agent)s) AS agents,"
            " (SELECT count(*) FROM credentials WHERE agent_id = %(agent)s"
            "  AND revoked_at IS NULL) AS valid_credentials,"
            " (SELECT count(*) FROM runs WHERE agent_id = %(agent)s) AS runs,"
            " (SELECT count(*) FROM events) AS events",
            {"agent": agent_id},
        ).fetchone()
    assert row is not None
    return dict(row)


def test_a_body_sent_to_a_destructive_route_changes_nothing(
    api: Api,
    pool: Pool,
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    org = make_org("Acme")
    agent = make_agent(org)
    with pool.connection() as conn:
        credential = conn.execute(
            "SELECT id FROM credentials WHERE agent_id = %s", [agent.agent_id]
        ).fetchone()
    assert credential is not None
    before = _agent_state(pool, agent.agent_id)
    attempts = [
        (operator_key, "DELETE", f"/v1/admin/agents/{agent.agent_id}"),
        (operator_key, "POST", f"/v1/admin/credentials/{credential['id']}/revoke"),
        (operator_key, "POST", f"/v1/admin/credentials/{credential['id']}/rotate"),
        (org.panel_key, "POST", f"/v1/agents/{agent.agent_id}/update"),
    ]
    for key, method, path in attempts:
        with api.client(key) as client:
            answer = client.request(method, path, content=BODY, headers=JSON)
        assert _refused_for_its_body(answer, method, path), (method, path, answer.text)
    assert _agent_state(pool, agent.agent_id) == before
    with api.client(agent.agent_key) as still_enrolled:
        assert still_enrolled.get(CONFIG_PATH).status_code == 200
