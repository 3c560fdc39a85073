"""The tokens' API over real HTTP: operators make, list and revoke any organisation's tokens; a
panel key only its own organisation's. A list never shows a secret; bounds are refused naming
the field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from control_plane.events.trail import Actor
from ground.contract import ENROLL_PATH
from tests.control_plane.conftest import Org
from tests.control_plane.enrollment.conftest import Enrollment
from tests.control_plane.root_chain import RootChain

ADMIN = "/v1/admin/enrollment-tokens"
OWN = "/v1/enrollment-tokens"


def _post(world: Enrollment, key: str, path: str, **body: Any) -> Any:
    with world.api.client(key) as client:
        return client.post(path, json=body or None)


def test_an_operator_makes_a_token_and_sees_it_once_with_the_install_line(
    world: Enrollment,
) -> None:
    answer = _post(
        world,
        world.operator_key,
        ADMIN,
        org_id=world.org.org_id,
        uses=3,
        expires_in_minutes=90,
        name_pattern="web-*",
        label="web servers",
    )
    assert answer.status_code == 201, answer.text
    shown = answer.json()
    assert shown["secret"].startswith("nwe_")
    # No trust root is published: the line trusts the release key, a file from the provider.
    assert shown["install_command"] == (
        f"nachtwacht agent install --url {world.api.base_url} --enrollment-token {shown['secret']}"
        " --trusted-key release.pub"
    )
    token = shown["token"]
    assert (token["uses_allowed"], token["uses_left"], token["state"]) == (3, 3, "active")
    assert token["expires_at"] == "2026-11-30T02:30:00Z"
    assert (token["name_pattern"], token["label"]) == ("web-*", "web servers")
    with world.api.client(world.operator_key) as operator:
        listed = operator.get(ADMIN, params={"org_id": world.org.org_id})
    assert listed.status_code == 200
    assert [entry["id"] for entry in listed.json()["tokens"]] == [token["id"]]
    assert shown["secret"] not in listed.text
    assert "secret" not in listed.json()["tokens"][0]


def test_the_install_line_trusts_the_newest_published_trust_root(world: Enrollment) -> None:
    chain = RootChain()
    actor = Actor(kind="operator", name="cli:tests")
    world.services.trust_roots.publish(chain.v1, now=world.clock.now(), actor=actor)
    world.services.trust_roots.publish(chain.next(chain.v1), now=world.clock.now(), actor=actor)
    for key, path, body in (
        (world.operator_key, ADMIN, {"org_id": world.org.org_id}),
        (world.org.panel_key, OWN, {"uses": 1}),
    ):
        answer = _post(world, key, path, **body)
        assert answer.status_code == 201, answer.text
        shown = answer.json()
        assert shown["install_command"] == (
            f"nachtwacht agent install --url {world.api.base_url}"
            f" --enrollment-token {shown['secret']} --trust-root root-2.json"
        )


def test_a_revoked_token_is_listed_revoked_and_refused_at_once(world: Enrollment) -> None:
    shown = _post(world, world.operator_key, ADMIN, org_id=world.org.org_id).json()
    revoked = _post(world, world.operator_key, f"{ADMIN}/{shown['token']['id']}/revoke")
    assert revoked.status_code == 200
    assert revoked.json()["state"] == "revoked"
    again = _post(world, world.operator_key, f"{ADMIN}/{shown['token']['id']}/revoke")
    assert again.json()["revoked_at"] == revoked.json()["revoked_at"]
    assert world.enroll(shown["secret"]).status_code == 401
    (event,) = world.events("enrollment_token.revoked")
    assert event["data"]["token_id"] == shown["token"]["id"]


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        pytest.param("uses", 0, "greater than or equal to 1", id="no_use"),
        pytest.param("uses", 10_001, "less than or equal to 10000", id="too_many_uses"),
        pytest.param("expires_in_minutes", 0, "greater than or equal to 1", id="expired_at_once"),
        pytest.param(
            "expires_in_minutes", 30 * 24 * 60 + 1, "less than or equal to 43200", id="over_30_days"
        ),
        pytest.param("name_pattern", "web\n*", "match pattern", id="pattern_control_char"),
        pytest.param("label", " ", "match pattern", id="blank_label"),
    ],
)
def test_a_bound_is_refused_naming_the_field_and_the_value(
    world: Enrollment, field: str, value: object, expected: str
) -> None:
    answer = _post(world, world.operator_key, ADMIN, org_id=world.org.org_id, **{field: value})
    assert answer.status_code == 422
    message = answer.json()["detail"]["message"]
    assert message.startswith(f"{field}: ")
    assert expected in message
    assert world.footprint().uses == {}


def test_a_token_for_an_organisation_that_does_not_exist_is_not_found(world: Enrollment) -> None:
    answer = _post(world, world.operator_key, ADMIN, org_id="00000000-0000-4000-8000-000000000001")
    assert answer.status_code == 404
    assert answer.json()["detail"]["code"] == "org_not_found"


def test_a_customer_makes_lists_and_revokes_only_its_own_tokens(
    world: Enrollment, make_org: Callable[..., Org]
) -> None:
    other = make_org("Globex")
    mine = _post(world, world.org.panel_key, OWN, uses=2)
    theirs = _post(world, other.panel_key, OWN, uses=1)
    assert mine.status_code == theirs.status_code == 201
    with world.api.client(world.org.panel_key) as panel:
        listed = panel.get(OWN).json()["tokens"]
    assert [entry["id"] for entry in listed] == [mine.json()["token"]["id"]]
    assert listed[0]["org_id"] == world.org.org_id
    refused = _post(world, world.org.panel_key, f"{OWN}/{theirs.json()['token']['id']}/revoke")
    assert refused.status_code == 404
    assert world.enroll(theirs.json()["secret"]).status_code == 201
    revoked = _post(world, world.org.panel_key, f"{OWN}/{mine.json()['token']['id']}/revoke")
    assert revoked.status_code == 200
    (created, _) = world.events("enrollment_token.created")
    assert created["actor_kind"] == "user"


def test_the_agent_made_with_a_customers_token_is_in_that_organisation(
    world: Enrollment,
) -> None:
    shown = _post(world, world.org.panel_key, OWN, label="web").json()
    with world.api.client(shown["secret"]) as host:
        enrolled = host.post(ENROLL_PATH, json={"name": "web-01"}).json()
    with world.api.client(world.org.panel_key) as panel:
        agents = panel.get("/v1/agents").json()
    assert enrolled["agent_id"] in str(agents)


def test_a_panel_key_cannot_use_the_operators_routes(world: Enrollment) -> None:
    answer = _post(world, world.org.panel_key, ADMIN, org_id=world.org.org_id)
    assert answer.status_code == 403
