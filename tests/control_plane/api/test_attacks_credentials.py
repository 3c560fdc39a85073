"""Credentials as an attacker (or a lost laptop) would use them, and the operators' trail:
a revoked or rotated-away credential is refused at once; a deleted agent's
credential is refused while its history stays for the operators; one agent credential answered
by two hosts shows; every operator action and schedule change is an event with its actor, and a
line of the server's log."""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.accounts.credentials import Audience
from control_plane.events.trail import Actor
from control_plane.registry import Services
from control_plane.types import Pool
from ground.contract import HOST_ID_HEADER
from tests.control_plane.conftest import (
    Agent,
    Api,
    Org,
    SignedRelease,
    sign_release,
)
from tests.control_plane.test_cli import run_control
from tests.worlds.clocks import ManualClock

SLOT = "2026-11-30T03:00"


def _operator(api: Api, key: str, method: str, path: str, **kwargs: Any) -> Any:
    with api.client(key) as client:
        return client.request(method, path, **kwargs)


@pytest.mark.parametrize("audience", ["panel", "operator"])
def test_a_revoked_credential_is_refused_at_once(
    api: Api, operator_key: str, make_org: Callable[..., Org], audience: str
) -> None:
    org = make_org("Acme")
    issued = _operator(
        api,
        operator_key,
        "POST",
        "/v1/admin/credentials",
        json={"audience": audience, "name": "Ana (support)"}
        | ({"org_id": org.org_id} if audience == "panel" else {}),
    ).json()
    path = "/v1/agents" if audience == "panel" else "/v1/admin/settings"
    with api.client(issued["secret"]) as holder:
        assert holder.get(path).status_code == 200
        revoked = _operator(
            api, operator_key, "POST", f"/v1/admin/credentials/{issued['credential']['id']}/revoke"
        )
        assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
        assert holder.get(path).status_code == 401  # the very next request


def test_a_rotated_agent_credential_is_refused_and_its_successor_works(
    api: Api, operator_key: str, make_org: Callable[..., Org], make_agent: Callable[..., Agent]
) -> None:
    agent = make_agent(make_org("Acme"))
    listed = _operator(
        api, operator_key, "GET", "/v1/admin/credentials", params={"agent_id": agent.agent_id}
    ).json()["credentials"]
    [old] = listed
    assert (old["audience"], old["name"]) == ("agent", "web-01")
    rotated = _operator(api, operator_key, "POST", f"/v1/admin/credentials/{old['id']}/rotate")
    assert rotated.status_code == 201
    with api.client(agent.agent_key) as stale, api.client(rotated.json()["secret"]) as fresh:
        assert stale.get("/v1/agent/config").status_code == 401
        assert fresh.get("/v1/agent/config").json()["agent_id"] == agent.agent_id
    again = _operator(api, operator_key, "POST", f"/v1/admin/credentials/{old['id']}/rotate")
    assert again.status_code == 409  # a revoked credential has no successor to mint


def test_credentials_are_listed_with_their_names_and_never_a_secret(
    api: Api, operator_key: str, make_org: Callable[..., Org]
) -> None:
    org = make_org("Acme")
    for name in ("Ana", "Bram"):
        _operator(
            api,
            operator_key,
            "POST",
            "/v1/admin/credentials",
            json={"audience": "panel", "name": name, "org_id": org.org_id},
        )
    listed = _operator(
        api, operator_key, "GET", "/v1/admin/credentials", params={"org_id": org.org_id}
    )
    names = sorted(c["name"] for c in listed.json()["credentials"])
    assert names == ["Ana", "Bram", "first panel key"]
    assert "nwp_" not in listed.text and "sha256" not in listed.text


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"audience": "agent", "name": "x"}, id="agent_by_hand"),
        pytest.param({"audience": "panel", "name": "no org"}, id="panel_without_org"),
        pytest.param({"audience": "operator", "name": ""}, id="empty_name"),
        pytest.param({"audience": "operator", "name": "a\u0000b"}, id="nul_in_name"),
        pytest.param({"audience": "operator", "name": "x" * 201}, id="name_too_long"),
    ],
)
def test_a_credential_that_cannot_be_issued_is_refused_and_none_is_stored(
    api: Api, pool: Pool, operator_key: str, body: dict[str, Any]
) -> None:
    with pool.connection() as conn:
        before = conn.execute("SELECT count(*) AS n FROM credentials").fetchone()
    response = _operator(api, operator_key, "POST", "/v1/admin/credentials", json=body)
    assert response.status_code == 422
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM credentials").fetchone() == before


def test_a_deleted_agent_is_refused_and_its_history_stays(
    api: Api,
    clock: ManualClock,
    operator_key: str,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    del published
    org = make_org("Acme")
    agent = make_agent(org)
    clock.set(datetime(2026, 11, 30, 2, 1, tzinfo=UTC))
    with api.client(agent.agent_key) as client:
        assert client.post("/v1/agent/claims", json={"slot_key": SLOT}).status_code == 201
    deleted = _operator(api, operator_key, "DELETE", f"/v1/admin/agents/{agent.agent_id}")
    assert deleted.status_code == 200 and deleted.json()["revoked_credentials"] == 1
    with api.client(agent.agent_key) as client:
        assert client.get("/v1/agent/config").status_code == 401
    with api.client(org.panel_key) as panel:
        assert panel.get(f"/v1/agents/{agent.agent_id}").status_code == 404
        assert panel.get("/v1/agents").json()["agents"] == []
    runs = _operator(api, operator_key, "GET", f"/v1/admin/agents/{agent.agent_id}/runs")
    assert [run["slot_key"] for run in runs.json()["runs"]] == [SLOT]
    events = _operator(
        api, operator_key, "GET", "/v1/admin/events", params={"agent_id": agent.agent_id}
    ).json()["events"]
    assert [event["kind"] for event in events] == ["agent.deleted", "update.scheduled"]
    again = _operator(api, operator_key, "DELETE", f"/v1/admin/agents/{agent.agent_id}")
    assert again.status_code == 404
    # Its name is free for a new enrolment.
    make_agent(org, "web-01")


def test_one_agent_credential_on_two_hosts_is_shown(
    api: Api, make_org: Callable[..., Org], make_agent: Callable[..., Agent]
) -> None:
    org = make_org("Acme")
    agent = make_agent(org)
    for host in ("host-aaaaaaaa", "host-bbbbbbbb"):
        with api.client(agent.agent_key) as client:
            answer = client.get("/v1/agent/config", headers={HOST_ID_HEADER: host})
            assert answer.status_code == 200
    with api.client(org.panel_key) as panel:
        page = panel.get(f"/v1/agents/{agent.agent_id}").json()
    assert sorted(host["host_id"] for host in page["hosts"]) == ["host-aaaaaaaa", "host-bbbbbbbb"]
    assert page["shared_identity"] is True


def test_one_host_is_no_shared_identity(
    api: Api, make_org: Callable[..., Org], make_agent: Callable[..., Agent]
) -> None:
    org = make_org("Acme")
    agent = make_agent(org)
    with api.client(agent.agent_key) as client:
        for _ in range(3):
            client.get("/v1/agent/config", headers={HOST_ID_HEADER: "host-aaaaaaaa"})
    with api.client(org.panel_key) as panel:
        page = panel.get(f"/v1/agents/{agent.agent_id}").json()
    assert [host["host_id"] for host in page["hosts"]] == ["host-aaaaaaaa"]
    assert page["shared_identity"] is False


@pytest.mark.parametrize(
    "host_id",
    [
        pytest.param("short", id="too_short"),
        pytest.param("x" * 65, id="too_long"),
        pytest.param("host id with spaces", id="spaces"),
        pytest.param("host';DROP TABLE agents;--", id="sql"),
    ],
)
def test_a_malformed_host_id_is_a_422_and_nothing_is_recorded(
    api: Api, pool: Pool, make_org: Callable[..., Org], make_agent: Callable[..., Agent],
    host_id: str,
) -> None:  # fmt: skip
    agent = make_agent(make_org("Acme"))
    with api.client(agent.agent_key) as client:
        response = client.get("/v1/agent/config", headers={HOST_ID_HEADER: host_id})
    assert response.status_code == 422
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM agent_hosts").fetchone() == {"n": 0}


# -- the trail --------------------------------------------------------------------------------


def test_every_operator_action_is_an_event_with_its_actor_and_a_log_line(
    api: Api,
    caplog: pytest.LogCaptureFixture,
    services: Services,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    release_key: Ed25519PrivateKey,
) -> None:
    operator = services.accounts.issue(
        Audience.OPERATOR, name="Olga (on call)", now=None, actor=Actor(kind="operator")
    )
    key = operator.secret
    org = make_org("Acme")
    agent = make_agent(org)
    release = sign_release(release_key)

    caplog.set_level(logging.INFO, logger="control_plane.trail")
    caplog.clear()
    actions = [
        ("PUT", "/v1/admin/brake", {"json": {"engaged": True, "reason": "1.5.0 breaks TLS"}}),
        ("PUT", "/v1/admin/brake", {"json": {"engaged": False}}),
        ("PUT", "/v1/admin/settings", {"json": {"org_cap": 3}}),
        (
            "POST",
            "/v1/admin/releases",
            {
                "json": {
                    "manifest_b64": base64.b64encode(release.manifest).decode(),
                    "signature_b64": base64.b64encode(release.signature).decode(),
                    "artifact_b64": base64.b64encode(release.artifact).decode(),
                }
            },
        ),
        (
            "POST",
            "/v1/admin/credentials",
            {"json": {"audience": "panel", "name": "Ana", "org_id": org.org_id}},
        ),
    ]
    for method, path, kwargs in actions:
        assert _operator(api, key, method, path, **kwargs).status_code in {200, 201}, path
    with api.client(org.panel_key) as panel:
        panel.put(
            f"/v1/agents/{agent.agent_id}/schedule", json={"enabled": True, "times": ["04:00"]}
        )
    trail = _operator(api, key, "GET", "/v1/admin/events", params={"limit": 50}).json()["events"]
    kinds = [event["kind"] for event in reversed(trail)]
    expected = [
        "brake.engaged",
        "brake.released",
        "settings.changed",
        "release.published",
        "credential.issued",
        "schedule.changed",
    ]
    assert kinds[-6:] == expected
    by_kind: dict[str, Any] = {}
    for event in trail:  # newest first: the actions above, not the fixtures' enrolments
        by_kind.setdefault(event["kind"], event)
    for kind in expected[:-1]:
        assert by_kind[kind]["actor"] == {
            "kind": "operator",
            "id": str(operator.credential.id),
            "name": "Olga (on call)",
        }
    assert by_kind["brake.engaged"]["data"]["reason"] == "1.5.0 breaks TLS"
    assert by_kind["settings.changed"]["data"] == {
        "before": {"org_cap": 5},
        "after": {"org_cap": 3},
    }
    schedule = by_kind["schedule.changed"]
    assert (schedule["actor"]["kind"], schedule["actor"]["name"]) == ("user", "first panel key")
    assert schedule["data"] == {
        "before": {"enabled": True, "times": ["03:00"]},
        "after": {"enabled": True, "times": ["04:00"]},
    }
    lines = [record.getMessage() for record in caplog.records]
    assert [line.split(" ", 1)[0] for line in lines] == expected
    assert all("Olga (on call)" in line for line in lines[:-1])


def test_the_trail_filters_by_kind_family_and_actor(
    api: Api, operator_key: str, make_org: Callable[..., Org]
) -> None:
    org = make_org("Acme")
    issued = _operator(
        api,
        operator_key,
        "POST",
        "/v1/admin/credentials",
        json={"audience": "panel", "name": "Ana", "org_id": org.org_id},
    ).json()
    _operator(
        api, operator_key, "POST", f"/v1/admin/credentials/{issued['credential']['id']}/revoke"
    )
    _operator(api, operator_key, "PUT", "/v1/admin/settings", json={"org_cap": 4})
    family = _operator(
        api, operator_key, "GET", "/v1/admin/events", params={"kind": "credential."}
    ).json()["events"]
    assert {event["kind"] for event in family} == {"credential.issued", "credential.revoked"}
    one_org = _operator(
        api, operator_key, "GET", "/v1/admin/events", params={"org_id": org.org_id}
    ).json()["events"]
    assert all(event["org_id"] == org.org_id for event in one_org) and one_org
    refused = _operator(api, operator_key, "GET", "/v1/admin/events", params={"limit": 0})
    assert refused.status_code == 422
    window = {"since": "2026-11-30T02:00:00Z", "until": "2026-11-30T02:00:00Z"}
    empty = _operator(api, operator_key, "GET", "/v1/admin/events", params=window)
    assert empty.status_code == 422
    assert empty.json()["detail"]["field"] == "until"


def test_the_command_line_lists_revokes_and_rotates_with_json(
    database_url: str, api: Api, make_org: Callable[..., Org]
) -> None:
    org = make_org("Acme")

    def control(*args: str) -> Any:
        result = run_control(*args, "--json", "--database-url", database_url)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    issued = control("create-panel-key", "--org", org.org_id, "--name", "Ana")
    assert issued["name"] == "Ana"
    listed = control("list-credentials", "--org", org.org_id)["credentials"]
    assert sorted(c["name"] for c in listed) == ["Ana", "first panel key"]
    rotated = control("rotate-credential", issued["credential_id"])
    assert rotated["credential"]["name"] == "Ana" and rotated["secret"].startswith("nwp_")
    with api.client(issued["panel_key"]) as stale, api.client(rotated["secret"]) as fresh:
        assert stale.get("/v1/agents").status_code == 401
        assert fresh.get("/v1/agents").status_code == 200
    revoked = control("revoke-credential", rotated["credential"]["id"])
    assert revoked["revoked_at"] is not None
    with api.client(rotated["secret"]) as holder:
        assert holder.get("/v1/agents").status_code == 401
    trail = control("events", "--kind", "credential.")["events"]
    assert [e["kind"] for e in trail][:3] == [
        "credential.revoked",
        "credential.rotated",
        "credential.issued",
    ]
    assert all(e["actor"]["name"].startswith("cli:") for e in trail[:3])
    missing = run_control(
        "revoke-credential", "not-an-id", "--json", "--database-url", database_url
    )
    assert missing.returncode == 2 and "not an id" in missing.stderr
    # Without --json the instant reads as every other the command line prints, in UTC with a Z.
    listed_all = run_control(
        "list-credentials", "--org", org.org_id, "--all", "--database-url", database_url
    )
    assert listed_all.returncode == 0, listed_all.stderr
    revoked_lines = [line for line in listed_all.stdout.splitlines() if "revoked" in line]
    assert len(revoked_lines) == 2, listed_all.stdout
    assert all(
        re.search(r"; revoked \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)$", line) for line in revoked_lines
    ), listed_all.stdout
