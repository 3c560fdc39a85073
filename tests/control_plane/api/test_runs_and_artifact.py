"""Run outcomes, the artifact download with Range, events, manual updates and the brake."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from control_plane.types import Pool
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease
from tests.worlds.clocks import ManualClock

SLOT = "2026-11-30T03:00"


@pytest.fixture
def org(make_org: Callable[..., Org]) -> Org:
    return make_org()


@pytest.fixture
def agent(org: Org, make_agent: Callable[..., Agent]) -> Agent:
    return make_agent(org)


@pytest.fixture
def claimed(api: Api, clock: ManualClock, published: SignedRelease, agent: Agent) -> dict[str, Any]:
    clock.set(datetime(2026, 11, 30, 2, 1, tzinfo=UTC))
    with api.client(agent.agent_key) as client:
        response = client.post("/v1/agent/claims", json={"slot_key": SLOT, "from_version": "1.4.1"})
    assert response.status_code == 201
    body: dict[str, Any] = response.json()
    return body


def _download(api: Api, agent: Agent, run_id: str, **headers: str) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        return client.get(f"/v1/agent/runs/{run_id}/artifact", headers=headers)


def test_download_gives_the_artifact_with_its_sha256_as_etag(
    api: Api, agent: Agent, claimed: dict[str, Any], published: SignedRelease
) -> None:
    response = _download(api, agent, claimed["run_id"])
    assert response.status_code == 200
    assert response.content == published.artifact
    assert response.headers["ETag"] == f'"{hashlib.sha256(published.artifact).hexdigest()}"'
    assert response.headers["Accept-Ranges"] == "bytes"


@pytest.mark.parametrize(
    ("range_header", "start", "end"),
    [
        pytest.param("bytes=10-19", 10, 19, id="middle"),
        pytest.param("bytes=10000-", 10000, 10239, id="open_end"),
        pytest.param("bytes=-5", 10235, 10239, id="suffix"),
        pytest.param("bytes=10230-99999", 10230, 10239, id="end_past_length"),
    ],
)
def test_range_resumes_a_download(
    api: Api,
    agent: Agent,
    claimed: dict[str, Any],
    published: SignedRelease,
    range_header: str,
    start: int,
    end: int,
) -> None:
    etag = f'"{hashlib.sha256(published.artifact).hexdigest()}"'
    response = _download(api, agent, claimed["run_id"], Range=range_header, **{"If-Range": etag})
    assert response.status_code == 206
    assert response.content == published.artifact[start : end + 1]
    assert response.headers["Content-Range"] == f"bytes {start}-{end}/{len(published.artifact)}"


def test_range_with_a_stale_if_range_gets_the_whole_artifact(
    api: Api, agent: Agent, claimed: dict[str, Any], published: SignedRelease
) -> None:
    response = _download(
        api, agent, claimed["run_id"], Range="bytes=10-19", **{"If-Range": '"an-older-build"'}
    )
    assert response.status_code == 200
    assert response.content == published.artifact


def test_range_past_the_end_gets_416(
    api: Api, agent: Agent, claimed: dict[str, Any], published: SignedRelease
) -> None:
    response = _download(api, agent, claimed["run_id"], Range=f"bytes={len(published.artifact)}-")
    assert response.status_code == 416
    assert response.headers["Content-Range"] == f"bytes */{len(published.artifact)}"


def test_download_is_refused_after_the_token_expires(
    api: Api, clock: ManualClock, agent: Agent, claimed: dict[str, Any]
) -> None:
    clock.set(datetime(2026, 11, 30, 3, 1, tzinfo=UTC))
    response = _download(api, agent, claimed["run_id"])
    assert response.status_code == 403
    assert response.json()["detail"]["code"] == "token_expired"


def test_download_is_refused_with_a_revoked_token(
    api: Api, agent: Agent, claimed: dict[str, Any], operator_key: str
) -> None:
    with api.client(operator_key) as operator:
        revoked = operator.post(f"/v1/admin/tokens/{claimed['token']['id']}/revoke")
    assert revoked.status_code == 200
    response = _download(api, agent, claimed["run_id"])
    assert response.status_code == 403
    assert response.json()["detail"]["code"] == "token_revoked"


def test_another_agents_run_is_not_found(
    api: Api, org: Org, make_agent: Callable[..., Agent], claimed: dict[str, Any]
) -> None:
    thief = make_agent(org, "web-02")
    assert _download(api, thief, claimed["run_id"]).status_code == 404
    with api.client(thief.agent_key) as client:
        patched = client.patch(
            f"/v1/agent/runs/{claimed['run_id']}", json={"status": "succeeded", "version": "1.5.0"}
        )
    assert patched.status_code == 404


def test_outcome_is_reported_once_and_idempotent(
    api: Api, org: Org, agent: Agent, claimed: dict[str, Any]
) -> None:
    path = f"/v1/agent/runs/{claimed['run_id']}"
    with api.client(agent.agent_key) as client:
        first = client.patch(path, json={"status": "succeeded", "version": "1.5.0"})
        again = client.patch(path, json={"status": "succeeded", "version": "1.5.0"})
        other = client.patch(path, json={"status": "failed", "error": "late"})
        bogus = client.patch(path, json={"status": "claimed"})
    assert (first.status_code, again.status_code) == (200, 200)
    assert first.json()["status"] == "succeeded"
    assert other.status_code == 409
    assert bogus.status_code == 422
    with api.client(org.panel_key) as panel:
        page = panel.get(f"/v1/agents/{agent.agent_id}").json()
    assert page["version"] == "1.5.0"
    assert page["latest_runs"][0]["status"] == "succeeded"
    # The finished run's token no longer downloads.
    assert _download(api, agent, claimed["run_id"]).status_code == 403


def test_scheduled_update_events_name_the_schedule_not_a_user(
    api: Api, org: Org, agent: Agent, claimed: dict[str, Any]
) -> None:
    with api.client(agent.agent_key) as client:
        client.patch(
            f"/v1/agent/runs/{claimed['run_id']}", json={"status": "failed", "error": "health"}
        )
    with api.client(org.panel_key) as panel:
        events = panel.get(f"/v1/agents/{agent.agent_id}/events").json()["events"]
        operations = panel.get("/v1/operations").json()["operations"]
    assert [event["kind"] for event in events] == ["update.failed", "update.scheduled"]
    assert {event["actor"]["kind"] for event in events} == {"schedule"}
    assert {event["actor"]["id"] for event in events} == {None}
    assert operations == []


def test_manual_update_runs_without_slot_or_caps(
    api: Api,
    clock: ManualClock,
    published: SignedRelease,
    org: Org,
    agent: Agent,
    operator_key: str,
    pool: Pool,
) -> None:
    # Not through the brake: a manual update under the brake is refused unless an operator
    # forces it.
    clock.set(datetime(2026, 11, 30, 14, 7, tzinfo=UTC))
    with api.client(operator_key) as operator:
        caps = operator.put("/v1/admin/settings", json={"org_cap": 1, "global_cap": 1})
    assert caps.status_code == 200
    with pool.connection() as conn:  # this round's caps are full (a cap is at least 1)
        conn.execute("INSERT INTO claim_rounds_global VALUES ('2026-11-30T14:07Z', 1)")
        conn.execute(
            "INSERT INTO claim_rounds_org VALUES ('2026-11-30T14:07Z', %s, 1)", [org.org_id]
        )
    with api.client(org.panel_key) as panel:
        requested = panel.post(f"/v1/agents/{agent.agent_id}/update")
        requested_again = panel.post(f"/v1/agents/{agent.agent_id}/update")
    assert (requested.status_code, requested_again.status_code) == (202, 200)
    run_id = requested.json()["run_id"]
    assert requested_again.json()["run_id"] == run_id

    with api.client(agent.agent_key) as client:
        config = client.get("/v1/agent/config").json()
        assert config["manual_update"] == {"run_id": run_id, "requested_at": "2026-11-30T14:07:00Z"}
        claim = client.post("/v1/agent/claims", json={"manual_run_id": run_id, "from_version": "1"})
        assert claim.status_code == 201
        assert claim.json()["slot_key"] is None
        assert client.get(claim.json()["release"]["artifact_url"]).status_code == 200
        client.patch(f"/v1/agent/runs/{run_id}", json={"status": "succeeded", "version": "1.5.0"})
        assert client.get("/v1/agent/config").json()["manual_update"] is None

    with api.client(org.panel_key) as panel:
        operations = panel.get("/v1/operations").json()["operations"]
        events = panel.get(f"/v1/agents/{agent.agent_id}/events").json()["events"]
    assert [(op["run_id"], op["status"], op["trigger"]) for op in operations] == [
        (run_id, "succeeded", "manual")
    ]
    requested_event = next(event for event in events if event["kind"] == "update.requested")
    assert requested_event["actor"]["kind"] == "user"
    assert requested_event["actor"]["id"] is not None


def test_brake_revokes_outstanding_tokens_and_changes_no_customer_setting(
    api: Api,
    org: Org,
    agent: Agent,
    claimed: dict[str, Any],
    operator_key: str,
    database_url: str,
) -> None:
    with api.client(org.panel_key) as panel:
        before = panel.get(f"/v1/agents/{agent.agent_id}").json()["schedule"]
    with api.client(operator_key) as operator:
        engaged = operator.put(
            "/v1/admin/brake",
            json={"engaged": True, "reason": "bad build", "revoke_outstanding": True},
        )
        assert operator.get("/v1/admin/brake").json()["engaged"] is True
    assert engaged.json()["revoked_tokens"] == 1
    refused = _download(api, agent, claimed["run_id"])
    assert refused.status_code == 403
    assert "brake" in refused.json()["detail"]["message"]
    with api.client(agent.agent_key) as client:
        config = client.get("/v1/agent/config").json()
        again = client.post("/v1/agent/claims", json={"slot_key": SLOT, "from_version": "1.4.1"})
    assert config["brake"] == {"engaged": True, "reason": "bad build"}
    assert again.status_code == 503
    with api.client(org.panel_key) as panel:
        assert panel.get(f"/v1/agents/{agent.agent_id}").json()["schedule"] == before

    with api.client(operator_key) as operator:
        operator.put("/v1/admin/brake", json={"engaged": False})
    with api.client(agent.agent_key) as client:
        renewed = client.post("/v1/agent/claims", json={"slot_key": SLOT, "from_version": "1.4.1"})
    # Released within the window: the same run gets a new lease.
    assert renewed.status_code == 200
    assert renewed.json()["run_id"] == claimed["run_id"]
    assert renewed.json()["token"]["id"] != claimed["token"]["id"]
    assert _download(api, agent, claimed["run_id"]).status_code == 200


def test_brake_without_revocation_leaves_tokens_usable(
    api: Api, agent: Agent, claimed: dict[str, Any], operator_key: str
) -> None:
    with api.client(operator_key) as operator:
        engaged = operator.put(
            "/v1/admin/brake",
            json={"engaged": True, "reason": "incident 7", "revoke_outstanding": False},
        )
    assert engaged.json()["revoked_tokens"] == 0
    assert _download(api, agent, claimed["run_id"]).status_code == 200


def test_nothing_to_do_after_a_claim_is_refused(
    api: Api, agent: Agent, claimed: dict[str, Any]
) -> None:
    with api.client(agent.agent_key) as client:
        response = client.post(
            "/v1/agent/runs", json={"slot_key": SLOT, "status": "up_to_date", "version": "1.4.1"}
        )
    assert response.status_code == 409
    assert response.json()["detail"]["code"] == "slot_consumed"


def test_manual_claim_of_an_unknown_or_finished_run_is_refused(
    api: Api,
    clock: ManualClock,
    published: SignedRelease,
    org: Org,
    agent: Agent,
    make_agent: Callable[..., Agent],
) -> None:
    clock.set(datetime(2026, 11, 30, 14, 0, tzinfo=UTC))
    with api.client(org.panel_key) as panel:
        run_id = panel.post(f"/v1/agents/{agent.agent_id}/update").json()["run_id"]
    other = make_agent(org, "web-02")
    with api.client(other.agent_key) as client:
        stolen = client.post("/v1/agent/claims", json={"manual_run_id": run_id})
    assert stolen.status_code == 404
    assert stolen.json()["detail"]["code"] == "run_not_found"
    with api.client(agent.agent_key) as client:
        assert client.post("/v1/agent/claims", json={"manual_run_id": run_id}).status_code == 201
        client.patch(f"/v1/agent/runs/{run_id}", json={"status": "failed", "error": "disk"})
        finished = client.post("/v1/agent/claims", json={"manual_run_id": run_id})
    assert finished.status_code == 409
    assert finished.json()["detail"]["code"] == "run_finished"
