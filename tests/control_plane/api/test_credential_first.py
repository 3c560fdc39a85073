"""The credential before the body (`control_plane/api/credential_first.py`): a request whose body
or query cannot be read gets the 401/403 its key earns on that route, and the 422 that names the
body's fields only with a good key. Walked over every route that takes a credential, over real
HTTP."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from control_plane.accounts.credentials import Audience
from control_plane.api.app import create_app
from control_plane.api.deps import ENROLLMENT_SCHEME
from control_plane.registry import Services
from ground.contract import CLAIMS_PATH, ENROLL_PATH
from tests.control_plane.conftest import Agent, Api, Org
from tests.worlds.clocks import ManualClock

SOME_ID = "00000000-0000-4000-8000-000000000001"
MALFORMED = b"{not json"
JSON = {"content-type": "application/json"}


def _credentialed_routes(
    services: Services, clock: ManualClock
) -> list[tuple[str, str, Audience | str]]:
    """Every operation the OpenAPI document says takes a key, with the key's audience (each
    audience has its own bearer scheme there: `control_plane.api.deps`), or the enrollment
    token's scheme."""
    found = []
    document = create_app(services, clock).openapi()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            requirements = operation.get("security", [])
            schemes = {name for requirement in requirements for name in requirement}
            if not schemes:
                continue
            (scheme,) = schemes
            taken = scheme if scheme == ENROLLMENT_SCHEME else Audience(scheme)
            found.append((method.upper(), re.sub(r"\{[^}]+\}", SOME_ID, path), taken))
    return found


@pytest.fixture
def keys(
    operator_key: str, make_org: Callable[..., Org], make_agent: Callable[..., Agent]
) -> Iterator[dict[Audience, str]]:
    org = make_org("Acme")
    yield {
        Audience.OPERATOR: operator_key,
        Audience.PANEL: org.panel_key,
        Audience.AGENT: make_agent(org).agent_key,
    }


def _other(audience: Audience) -> Audience:
    return Audience.PANEL if audience is not Audience.PANEL else Audience.AGENT


def test_every_credentialed_route_answers_a_malformed_body_with_the_keys_refusal(
    api: Api, services: Services, clock: ManualClock, keys: dict[Audience, str]
) -> None:
    routes = _credentialed_routes(services, clock)
    # The walk must see the routes it exists for (a dependency walk that found nothing would
    # pass vacuously): every audience, and the body routes that once answered 422 first.
    assert {audience for _, _, audience in routes} == {*Audience, ENROLLMENT_SCHEME}
    assert ("POST", CLAIMS_PATH, Audience.AGENT) in routes
    assert ("POST", ENROLL_PATH, ENROLLMENT_SCHEME) in routes
    assert ("PUT", "/v1/admin/settings", Audience.OPERATOR) in routes
    wrong: list[str] = []
    with api.client() as client:
        for method, path, audience in routes:
            # An enrollment token is no audience's key: any key that is not one is unknown.
            other = Audience.AGENT if audience == ENROLLMENT_SCHEME else _other(Audience(audience))
            cases: list[tuple[str, dict[str, str], int]] = [
                ("no key", {}, 401),
                ("a made-up key", {"authorization": "Bearer nwa_" + "x" * 40}, 401),
                (
                    "another audience's key",
                    {"authorization": f"Bearer {keys[other]}"},
                    401 if audience == ENROLLMENT_SCHEME else 403,
                ),
            ]
            for label, headers, status in cases:
                headers = {**JSON, **headers}
                answer = client.request(method, path, content=MALFORMED, headers=headers)
                if answer.status_code != status:
                    wrong.append(f"{method} {path} with {label}: {answer.status_code}")
    assert wrong == []


def test_with_a_good_key_the_422_still_names_the_field(api: Api, keys: dict[Audience, str]) -> None:
    with api.client(keys[Audience.AGENT]) as agent:
        answer = agent.post(CLAIMS_PATH, json={"slot_key": 5})
    assert answer.status_code == 422
    assert answer.json()["detail"]["code"] == "invalid_request"
    assert "slot_key" in answer.json()["detail"]["message"]
    with api.client(keys[Audience.OPERATOR]) as operator:
        unreadable = operator.put("/v1/admin/settings", content=MALFORMED, headers=JSON)
        not_utf8 = operator.put("/v1/admin/settings", content=b'{"org_cap": "\xff"}', headers=JSON)
    assert unreadable.status_code == 422
    assert not_utf8.status_code == 422


def test_a_key_without_a_body_rule_broken_is_refused_as_before(
    api: Api, keys: dict[Audience, str]
) -> None:
    with api.client("nwo_" + "y" * 40) as stranger:
        refused = stranger.put("/v1/admin/settings", json={"org_cap": 3})
    assert refused.status_code == 401
    with api.client(keys[Audience.PANEL]) as panel:
        not_undecodable = panel.put(
            "/v1/admin/settings", content=b'{"org_cap": "\xff"}', headers=JSON
        )
    assert not_undecodable.status_code == 403


def test_the_database_gone_during_the_check_is_a_503_not_a_stack_trace(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreachable(*_: Any, **__: Any) -> None:
        raise psycopg.OperationalError("connection refused")

    # One seam: the accounts service's lookup fails as a lost database does.
    monkeypatch.setattr(api.services.accounts, "authenticate", unreachable)
    with api.client() as client:
        answer = client.post(CLAIMS_PATH, content=MALFORMED, headers=JSON)
    assert answer.status_code == 503
    assert answer.json()["detail"]["code"] == "database_unavailable"
