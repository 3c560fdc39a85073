"""`POST /v1/agent/manual-updates`: the host asks for an update now (`nachtwacht agent update-now`).
The same manual run the panel files, with the agent as its actor; once per pending run."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from ground.contract import CONFIG_PATH, MANUAL_UPDATES_PATH
from nachtwacht.worlds.clocks import ManualClock
from tests.control_plane.conftest import Agent, Api, Org


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
