"""`POST /v1/agent/manual-updates`: the host asks for an update now (`nachtwacht agent update-now`).
The same manual run the panel files, with the agent as its actor; once per pending run. It takes no
body: one sent anyway is a 422 naming it (after the credential's 401/403), and nothing is filed."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from control_plane.types import Pool
from ground.contract import CONFIG_PATH, MANUAL_UPDATES_PATH
from tests.control_plane.conftest import Agent, Api, Org
from tests.worlds.clocks import ManualClock


@pytest.fixture
def org(make_org: Callable[..., Org]) -> Org:
    return make_org()


@pytest.fixture
def agent(org: Org, make_agent: Callable[..., Agent]) -> Agent:
    return make_agent(org)


def test_the_host_files_a_manual_run_the_agent_learns_from_its_config(
    api: Api, clock: ManualClock, org: Org, agent: Agent
) -> None:
    clock.set(datetime(2026, 11, 30, 14, 7, tzinfo=UTC))
    with api.client(agent.agent_key) as client:
        first = client.post(MANUAL_UPDATES_PATH)
        again = client.post(MANUAL_UPDATES_PATH)
        config = client.get(CONFIG_PATH).json()
    assert (first.status_code, again.status_code) == (201, 200)
    run_id = first.json()["run_id"]
    assert first.json() == {"run_id": run_id, "requested_at": "2026-11-30T14:07:00Z"}
    assert again.json()["run_id"] == run_id
    assert config["manual_update"]["run_id"] == run_id
    with api.client(org.panel_key) as panel:
        events = panel.get(f"/v1/agents/{agent.agent_id}/events").json()["events"]
    requested = [e for e in events if e["kind"] == "update.requested"]
    assert [(e["run_id"], e["actor"]["kind"]) for e in requested] == [(run_id, "agent")]


def test_only_an_agent_key_may_ask(api: Api, org: Org, agent: Agent) -> None:
    with api.client(None) as anonymous:
        assert anonymous.post(MANUAL_UPDATES_PATH).status_code == 401
    with api.client(org.panel_key) as panel:
        assert panel.post(MANUAL_UPDATES_PATH).status_code == 403


def _written(pool: Pool) -> dict[str, Any]:
    """What filing a manual update writes: its run row and its event."""
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM runs) AS runs, (SELECT count(*) FROM events) AS events"
        ).fetchone()
    assert row is not None
    return dict(row)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        pytest.param(
            b'{"agent_id": "another-agent", "version": "9.9.9"}',
            "application/json",
            id="json_object",
        ),
        pytest.param(b"{}", "application/json", id="empty_json_object"),
        pytest.param(b"null", "application/json", id="json_null"),
        pytest.param(b"update me now please", "text/plain", id="not_json"),
        pytest.param(b"\xff\xfe\x00garbage", "application/octet-stream", id="not_utf8"),
        pytest.param(b"x" * 60_000, "text/plain", id="large_under_the_limit"),
    ],
)
def test_a_body_is_refused_naming_it_and_nothing_is_filed(
    api: Api, pool: Pool, agent: Agent, body: bytes, content_type: str
) -> None:
    before = _written(pool)
    with api.client(agent.agent_key) as client:
        answer = client.post(
            MANUAL_UPDATES_PATH, content=body, headers={"Content-Type": content_type}
        )
    assert answer.status_code == 422
    detail = answer.json()["detail"]
    assert detail["code"] == "invalid_request"
    assert detail["field"] == "body"
    assert detail["message"].startswith("body: ")
    assert f"({len(body)} bytes)" in detail["message"]
    assert f"expected no body: POST {MANUAL_UPDATES_PATH} takes none" in detail["message"]
    # The refusal names what was found without echoing a large body back.
    assert len(detail["message"]) < 400
    assert len(str(detail["value"])) < 200
    assert _written(pool) == before


def test_a_huge_body_is_refused_before_the_route_and_nothing_is_filed(
    api: Api, pool: Pool, agent: Agent
) -> None:
    before = _written(pool)
    with api.client(agent.agent_key) as client:
        answer = client.post(MANUAL_UPDATES_PATH, content=b"x" * (2 * 1024 * 1024))
    assert answer.status_code == 413
    assert answer.json()["detail"]["code"] == "request_too_large"
    assert _written(pool) == before


def test_a_body_without_a_good_credential_is_a_credential_refusal_first(
    api: Api, pool: Pool, org: Org, agent: Agent
) -> None:
    before = _written(pool)
    with api.client(None) as anonymous:
        assert anonymous.post(MANUAL_UPDATES_PATH, json={"a": 1}).status_code == 401
    with api.client("nwa_made-up-key") as stranger:
        assert stranger.post(MANUAL_UPDATES_PATH, json={"a": 1}).status_code == 401
    with api.client(org.panel_key) as panel:
        assert panel.post(MANUAL_UPDATES_PATH, json={"a": 1}).status_code == 403
    assert _written(pool) == before


def test_no_body_and_an_empty_body_file_the_run(api: Api, pool: Pool, agent: Agent) -> None:
    with api.client(agent.agent_key) as client:
        first = client.post(MANUAL_UPDATES_PATH, content=b"")
        again = client.post(MANUAL_UPDATES_PATH)
    assert (first.status_code, again.status_code) == (201, 200)
    assert _written(pool)["runs"] == 1
