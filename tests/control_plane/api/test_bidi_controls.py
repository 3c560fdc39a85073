"""The bidirectional controls (U+202A-U+202E, U+2066-U+2069) in free text.

A reason an operator or a customer types (the brake, a halt and its resume, a hold, a withdrawal,
a forced update, a pin, a promotion, a rollback) is refused with one, as a name is: shown on the
trail, "disk full" + U+202E would turn the rest of its line around. So is a control character
(an escape sequence rewrites the terminal of whoever reads it). The refusal is a 422 naming the
field and the character, and nothing is recorded.

What an agent sends (a run's error) is never lost to a refusal: it is kept, each control stored
as its visible escape (`\\u202e`), and every reader gets that.
"""

from __future__ import annotations

from typing import Any

import pytest

from control_plane.types import Pool
from ground.contract.messages import MAX_HOLD_REASON_LENGTH
from ground.contract.plain_text import REASON_PATTERN
from tests.control_plane.api.conftest import AgentRequests
from tests.control_plane.conftest import Api, table_rows

SLOT = "2026-11-30T03:00"

# (who asks, method, path with {release}/{agent}/{org}, the body around the reason)
REASONS = [
    pytest.param("operator", "PUT", "/v1/admin/brake", {"engaged": True}, id="brake"),
    pytest.param(
        "operator",
        "PUT",
        "/v1/admin/releases/{release}/brake",
        {"engaged": True},
        id="release_brake",
    ),
    pytest.param("operator", "POST", "/v1/admin/releases/{release}/halt", {}, id="halt"),
    pytest.param("operator", "POST", "/v1/admin/releases/{release}/resume", {}, id="resume"),
    pytest.param("operator", "POST", "/v1/admin/releases/{release}/promote", {}, id="promote"),
    pytest.param("operator", "POST", "/v1/admin/releases/{release}/withdraw", {}, id="withdraw"),
    pytest.param(
        "operator",
        "POST",
        "/v1/admin/releases/rollback",
        {"channel": "stable", "platform": "linux-x86_64"},
        id="rollback",
    ),
    pytest.param(
        "operator", "POST", "/v1/admin/agents/{agent}/forced-update", {}, id="forced_update"
    ),
    pytest.param(
        "operator",
        "PUT",
        "/v1/admin/agents/{agent}/hold",
        {"until": "2026-12-02T08:00:00Z"},
        id="operator_hold",
    ),
    pytest.param(
        "panel", "PUT", "/v1/agents/{agent}/hold", {"until": "2026-12-02T08:00:00Z"}, id="hold"
    ),
    # The host's hold: its reason is typed by a person at the host (`nachtwacht agent hold`).
    pytest.param(
        "agent", "PUT", "/v1/agent/hold", {"until": "2026-12-02T08:00:00Z"}, id="host_hold"
    ),
    pytest.param(
        "operator", "PUT", "/v1/admin/agents/{agent}/pin", {"version": "1.5.0"}, id="agent_pin"
    ),
    pytest.param("operator", "PUT", "/v1/admin/orgs/{org}/pin", {"version": "1.5.0"}, id="org_pin"),
]

# Every table these requests write; a refused one leaves each as it was.
WATCHED = (
    "platform_brake",
    "release_halts",
    "releases",
    "holds",
    "pins",
    "runs",
    "tokens",
    "events",
)


@pytest.mark.parametrize(
    ("character", "named"),
    [
        pytest.param("\u202e", "the bidirectional control U+202E", id="right_to_left_override"),
        pytest.param("\u2067", "the bidirectional control U+2067", id="right_to_left_isolate"),
        pytest.param("\x1b", "the control character U+001B", id="escape"),
    ],
)
@pytest.mark.parametrize(("audience", "method", "path", "body"), REASONS)
def test_a_reason_a_person_types_with_a_control_is_a_422_naming_the_field_and_character(
    agent_requests: AgentRequests,
    api: Api,
    pool: Pool,
    operator_key: str,
    audience: str,
    method: str,
    path: str,
    body: dict[str, Any],
    character: str,
    named: str,
) -> None:
    org, agent = agent_requests.org, agent_requests.agent
    with pool.connection() as conn:
        release = conn.execute("SELECT id FROM releases").fetchone()
    assert release is not None
    url = path.format(release=release["id"], agent=agent.agent_id, org=org.org_id)
    key = {"operator": operator_key, "panel": org.panel_key, "agent": agent.agent_key}[audience]
    before = table_rows(pool, WATCHED)
    with api.client(key) as client:
        response = client.request(
            method, url, json={**body, "reason": f"disk full{character} on the canaries"}
        )
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail["field"] == "reason"
    assert detail["message"].startswith("reason: ")
    assert named in detail["message"], detail["message"]
    # The value quoted back is seen, not obeyed: each control as U+FFFD.
    assert detail["value"] == "disk full\ufffd on the canaries", detail
    assert table_rows(pool, WATCHED) == before


def test_every_reason_a_person_types_states_its_pattern_and_bound_in_the_document(
    api: Api,
) -> None:
    with api.client() as client:
        document = client.get("/openapi.json").json()
    schemas = document["components"]["schemas"]
    # Stated beside the `anyOf` of string and null (as every reason's pattern): a string must
    # match, null is untouched.
    host = schemas["HoldRequest"]["properties"]["reason"]
    assert (host["pattern"], host["maxLength"]) == (REASON_PATTERN, MAX_HOLD_REASON_LENGTH)
    # The same as the customer's and the operators' holds.
    panel = schemas["HoldBody"]["properties"]["reason"]
    assert panel["pattern"] == host["pattern"]
    assert panel["anyOf"][0]["maxLength"] == host["maxLength"]


def test_a_host_hold_reason_longer_than_its_bound_is_a_422_naming_the_field(
    agent_requests: AgentRequests, api: Api, pool: Pool
) -> None:
    agent = agent_requests.agent
    before = table_rows(pool, WATCHED)
    with api.client(agent.agent_key) as client:
        response = client.put(
            "/v1/agent/hold",
            json={"until": "2026-12-02T08:00:00Z", "reason": "x" * (MAX_HOLD_REASON_LENGTH + 1)},
        )
    assert response.status_code == 422, response.text
    assert response.json()["detail"]["message"].startswith("reason: "), response.text
    assert table_rows(pool, WATCHED) == before


def test_a_run_error_an_agent_sends_with_bidi_controls_is_kept_inert(
    agent_requests: AgentRequests, api: Api, pool: Pool
) -> None:
    org, agent = agent_requests.org, agent_requests.agent
    with api.client(agent.agent_key) as client:
        claimed = client.post("/v1/agent/claims", json={"slot_key": SLOT, "from_version": "1.4.1"})
        assert claimed.status_code == 201, claimed.text
        run_id = claimed.json()["run_id"]
        reported = client.patch(
            f"/v1/agent/runs/{run_id}",
            json={"status": "failed", "error": "health check: Mallory\u202e\u2066 said no"},
        )
    assert reported.status_code == 200, reported.text
    inert = "health check: Mallory\\u202e\\u2066 said no"
    with pool.connection() as conn:
        run = conn.execute("SELECT error FROM runs WHERE id = %s", [run_id]).fetchone()
    assert run is not None and run["error"] == inert
    with api.client(org.panel_key) as panel:
        page = panel.get(f"/v1/agents/{agent.agent_id}").json()
    assert page["latest_runs"][0]["error"] == inert
