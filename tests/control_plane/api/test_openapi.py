"""The API documents itself: every route is in the OpenAPI document, with its credential."""

from __future__ import annotations

from shared_planner import TIME_PATTERN
from tests.control_plane.conftest import Api

EXPECTED_PATHS = {
    "/v1/agents",
    "/v1/agents/{agent_id}",
    "/v1/agents/{agent_id}/schedule",
    "/v1/agents/{agent_id}/runs",
    "/v1/agents/{agent_id}/events",
    "/v1/agents/{agent_id}/update",
    "/v1/operations",
    "/v1/agent/config",
    "/v1/agent/claims",
    "/v1/agent/runs",
    "/v1/agent/runs/{run_id}",
    "/v1/agent/runs/{run_id}/artifact",
    "/v1/admin/settings",
    "/v1/admin/brake",
    "/v1/admin/tokens/{token_id}/revoke",
    "/v1/admin/releases",
    "/v1/agent/enroll",
    "/v1/admin/enrollment-tokens",
    "/v1/admin/enrollment-tokens/{token_id}/revoke",
    "/v1/enrollment-tokens",
    "/v1/enrollment-tokens/{token_id}/revoke",
}


def test_every_route_is_documented(api: Api) -> None:
    with api.client() as client:
        document = client.get("/openapi.json").json()
    assert EXPECTED_PATHS - set(document["paths"]) == set()
    schedule = document["components"]["schemas"]["ScheduleBody"]["properties"]["times"]
    assert schedule["items"]["pattern"] == TIME_PATTERN
