"""`GET /v1/agent/config`: the agent's view, the server's clock, ETag and 304."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from ground.contract import CONTRACT_VERSION
from tests.control_plane.conftest import Agent, Api, Org
from tests.worlds.clocks import ManualClock

SERVER_TIME = "X-Nachtwacht-Server-Time"


def test_config_carries_schedule_zone_window_brake_and_server_time(
    api: Api, clock: ManualClock, make_org: Callable[..., Org], make_agent: Callable[..., Agent]
) -> None:
    clock.set(datetime(2026, 10, 25, 0, 50, tzinfo=UTC))
    org = make_org()
    agent = make_agent(org)
    with api.client(agent.agent_key) as client:
        response = client.get("/v1/agent/config")
    assert response.status_code == 200
    assert response.json() == {
        "agent_id": agent.agent_id,
        "org_id": org.org_id,
        "name": "web-01",
        "schedule": {"enabled": True, "times": ["03:00"]},
        "timezone": "Europe/Amsterdam",
        "catch_up_minutes": 15,
        "brake": {"engaged": False, "reason": None},
        "track": {"channel": "stable", "platform": "linux-x86_64"},
        "release": None,
        "manual_update": None,
        "hold": None,
        "offer_note": None,
        "trust_root_version": None,
        "contract_version": CONTRACT_VERSION,
        "updater_release": None,
        "server_time": "2026-10-25T00:50:00Z",
    }
    assert response.headers[SERVER_TIME] == "2026-10-25T00:50:00Z"
    assert response.headers["ETag"]


def test_unchanged_config_gets_304_with_server_time(
    api: Api, clock: ManualClock, make_org: Callable[..., Org], make_agent: Callable[..., Agent]
) -> None:
    agent = make_agent(make_org())
    with api.client(agent.agent_key) as client:
        first = client.get("/v1/agent/config")
        clock.advance(minutes=1)
        second = client.get("/v1/agent/config", headers={"If-None-Match": first.headers["ETag"]})
    assert second.status_code == 304
    assert second.content == b""
    assert second.headers["ETag"] == first.headers["ETag"]
    assert second.headers[SERVER_TIME] == "2026-11-30T01:01:00Z"


def test_changed_schedule_changes_the_etag(
    api: Api, make_org: Callable[..., Org], make_agent: Callable[..., Agent]
) -> None:
    org = make_org()
    agent = make_agent(org)
    with api.client(agent.agent_key) as client, api.client(org.panel_key) as panel:
        first = client.get("/v1/agent/config")
        panel.put(
            f"/v1/agents/{agent.agent_id}/schedule", json={"enabled": True, "times": ["04:00"]}
        )
        second = client.get("/v1/agent/config", headers={"If-None-Match": first.headers["ETag"]})
    assert second.status_code == 200
    assert second.json()["schedule"]["times"] == ["04:00"]
    assert second.headers["ETag"] != first.headers["ETag"]


def test_changed_platform_settings_change_the_etag(
    api: Api,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    operator_key: str,
) -> None:
    agent = make_agent(make_org())
    with api.client(agent.agent_key) as client, api.client(operator_key) as operator:
        first = client.get("/v1/agent/config")
        operator.put("/v1/admin/settings", json={"catch_up_minutes": 10})
        second = client.get("/v1/agent/config", headers={"If-None-Match": first.headers["ETag"]})
    assert second.status_code == 200
    assert second.json()["catch_up_minutes"] == 10


def test_config_request_records_last_seen_on_the_server_clock(
    api: Api, clock: ManualClock, make_org: Callable[..., Org], make_agent: Callable[..., Agent]
) -> None:
    org = make_org()
    agent = make_agent(org)
    clock.set(datetime(2026, 11, 30, 2, 0, tzinfo=UTC))
    with api.client(agent.agent_key) as client, api.client(org.panel_key) as panel:
        assert panel.get(f"/v1/agents/{agent.agent_id}").json()["last_seen_at"] is None
        client.get("/v1/agent/config")
        assert panel.get(f"/v1/agents/{agent.agent_id}").json()["last_seen_at"] == (
            "2026-11-30T02:00:00Z"
        )
        clock.advance(minutes=5)
        client.get("/v1/agent/config")
        seen = panel.get(f"/v1/agents/{agent.agent_id}").json()["last_seen_at"]
    assert seen == "2026-11-30T02:05:00Z"


def test_error_responses_carry_the_server_time_too(api: Api) -> None:
    with api.client("nwa_not-a-real-key") as client:
        response = client.get("/v1/agent/config")
    assert response.status_code == 401
    assert response.headers[SERVER_TIME] == "2026-11-30T01:00:00Z"


def test_server_time_follows_the_clock_second_by_second_either_way(
    api: Api, clock: ManualClock
) -> None:
    """The header is formatted once per second and kept (`ServerTime`): it must still change
    with every second the clock shows, forwards and backwards, and only then."""
    instants = [
        datetime(2026, 11, 30, 1, 0, 0, 100_000, tzinfo=UTC),
        datetime(2026, 11, 30, 1, 0, 0, 999_999, tzinfo=UTC),
        datetime(2026, 11, 30, 1, 0, 1, tzinfo=UTC),
        datetime(2026, 11, 30, 0, 59, 59, 999_999, tzinfo=UTC),
        datetime(2026, 12, 1, 0, 59, 59, tzinfo=UTC),
    ]
    shown = []
    with api.client() as client:
        for instant in instants:
            clock.set(instant)
            shown.append(client.get("/healthz").headers[SERVER_TIME])
    assert shown == [
        "2026-11-30T01:00:00Z",
        "2026-11-30T01:00:00Z",
        "2026-11-30T01:00:01Z",
        "2026-11-30T00:59:59Z",
        "2026-12-01T00:59:59Z",
    ]
