"""Every JSON answer serves stored text inert, whatever the row holds: rows written before an
agent's text was made inert where it is stored (or by SQL) may hold raw escape sequences, C1
controls or bidirectional overrides in a run's error, an unreachable report's error, the versions
an agent reported, a name, an event's data. Written here by SQL, as such a row would be, and read
over real HTTP by each audience from every `GET` route the API document lists."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from control_plane.types import Pool
from ground.contract.plain_text import inert
from tests.control_plane.api.conftest import AgentRequests
from tests.control_plane.conftest import Api

# An escape sequence, a C1 CSI and a C1 NEL, a bidirectional override and isolate, a bell and a
# carriage return: each obeyed by a terminal or a text renderer, never shown.
HOSTILE = "\x1b[2J \x9b31m \x85 \u202eevil\u2066 \x07\r"
SLOT = "2026-11-30T03:00"
# What may pass through as it is: a line break and a tab read as themselves.
_OBEYED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _strings(value: Any) -> list[str]:
    """Every text in a decoded JSON answer, its keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in (*_strings(key), *_strings(item))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _obeyed(answer: Any) -> list[str]:
    return [text for text in _strings(answer) if _OBEYED.search(text)]


@pytest.fixture
def hostile_rows(agent_requests: AgentRequests, pool: Pool) -> dict[str, str]:
    """A claimed run, then its error and versions, the agent's name and version, an unreachable
    report, an event, the brake's reason and the organisation's name, each rewritten raw."""
    claimed = agent_requests.send(
        "POST",
        "/v1/agent/claims",
        [(b"content-type", b"application/json")],
        json.dumps({"slot_key": SLOT, "from_version": "1.4.1"}).encode(),
    )
    assert claimed.status_code == 201, claimed.text
    run_id = claimed.json()["run_id"]
    agent, org = agent_requests.agent, agent_requests.org
    with pool.connection() as conn:
        conn.execute(
            "UPDATE runs SET status = 'failed', error = %s, version = %s, from_version = %s,"
            " finished_at = created_at WHERE id = %s",
            ["health" + HOSTILE, "1.5.0" + HOSTILE, "1.4.1" + HOSTILE, run_id],
        )
        conn.execute(
            "UPDATE agents SET name = %s, current_version = %s WHERE id = %s",
            ["web" + HOSTILE, "1.4.1" + HOSTILE, agent.agent_id],
        )
        conn.execute("UPDATE orgs SET name = %s WHERE id = %s", ["Acme" + HOSTILE, org.org_id])
        conn.execute(
            "INSERT INTO unreachable_reports (agent_id, slot_key, slot_at, error, first_tried_at,"
            " last_tried_at, attempts, reported_at) VALUES (%s, '2026-11-29T03:00',"
            " '2026-11-29T02:00Z', %s, '2026-11-29T02:01Z', '2026-11-29T02:14Z', 3,"
            " '2026-11-29T02:20Z')",
            [agent.agent_id, "cannot connect" + HOSTILE],
        )
        conn.execute(
            "INSERT INTO events (org_id, agent_id, kind, actor_kind, actor_id, actor_name, at,"
            " data) VALUES (%s, %s, 'update.failed', 'agent', %s, %s, now(), %s)",
            [
                org.org_id,
                agent.agent_id,
                agent.agent_id,
                "web" + HOSTILE,
                json.dumps({"error": "health" + HOSTILE, "version": "1.5.0" + HOSTILE}),
            ],
        )
    return {"run_id": run_id}


def test_a_run_error_and_versions_stored_raw_are_served_inert_on_the_agents_page(
    agent_requests: AgentRequests, api: Api, hostile_rows: dict[str, str]
) -> None:
    agent, org = agent_requests.agent, agent_requests.org
    with api.client(org.panel_key) as panel:
        answer = panel.get(f"/v1/agents/{agent.agent_id}")
    assert answer.status_code == 200, answer.text
    page = answer.json()
    assert _obeyed(page) == [], _obeyed(page)
    run = page["latest_runs"][0]
    assert run["error"] == inert("health" + HOSTILE), run
    assert page["name"] == inert("web" + HOSTILE), page
    assert "\\u202e" in run["error"] and "\\u009b" in run["error"], run["error"]


def _get_paths(api: Api) -> list[str]:
    with api.client() as client:
        document = client.get("/openapi.json").json()
    return sorted(
        path
        for path, operations in document["paths"].items()
        if "get" in operations
        and path.startswith("/v1/")
        and not path.endswith(("/artifact", "/patches/{base_tar_sha256}"))
    )


def test_no_json_answer_serves_a_stored_control_raw(
    agent_requests: AgentRequests, api: Api, operator_key: str, hostile_rows: dict[str, str]
) -> None:
    """Every `GET` route, asked by each audience with the ids of the hostile rows: whatever it
    answers (a 200, or a refusal quoting a stored text), no text in it is obeyed."""
    agent, org = agent_requests.agent, agent_requests.org
    with api.client(operator_key) as operator:
        releases = operator.get("/v1/admin/releases").json()
    release_id = releases["tracks"][0]["releases"][0]["id"]
    ids = {
        "agent_id": agent.agent_id,
        "org_id": org.org_id,
        "run_id": hostile_rows["run_id"],
        "release_id": release_id,
    }
    served = []
    for path in _get_paths(api):
        try:
            url = path.format(**ids)
        except KeyError:
            continue
        for key in (operator_key, org.panel_key, agent.agent_key):
            with api.client(key) as client:
                answer = client.get(url)
            if not answer.headers.get("content-type", "").startswith("application/json"):
                continue
            body = answer.json()
            assert _obeyed(body) == [], (url, _obeyed(body))
            if answer.status_code == 200:
                served.append(url)
    # The answers that hold the hostile rows were among those asked.
    assert f"/v1/agents/{agent.agent_id}" in served
    assert "/v1/agents" in served
    assert "/v1/agent/config" in served
    assert "/v1/admin/events" in served


def test_a_webhook_body_carries_a_stored_summary_inert() -> None:
    """A notification's summary stored before agents' text was inert (or by SQL): the body the
    customer's receiver decodes holds no obeyed character."""
    from datetime import UTC, datetime
    from uuid import uuid4

    from control_plane.notifications.delivery import delivery_body

    row = {
        "notification_id": uuid4(),
        "org_id": uuid4(),
        "slot_key": SLOT,
        "created_at": datetime(2026, 11, 30, 2, 20, tzinfo=UTC),
        "body": {"failed": [{"agent": "web" + HOSTILE, "error": "health" + HOSTILE}]},
    }
    decoded = json.loads(delivery_body(row))
    assert _obeyed(decoded) == [], _obeyed(decoded)
    assert decoded["notification"]["failed"][0]["error"] == inert("health" + HOSTILE)


def test_metrics_labels_carry_a_reported_version_stored_raw_inert(
    agent_requests: AgentRequests, api: Api, pool: Pool, operator_key: str
) -> None:
    """The version of nachtwacht's own agent a host reported, stored raw: `/metrics` is text a
    person reads with `curl` too, so its label is inert."""
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO agent_updater_versions (agent_id, version, reported_at)"
            " VALUES (%s, %s, now())",
            [agent_requests.agent.agent_id, "0.9.0" + HOSTILE],
        )
    with api.client(operator_key) as operator:
        answer = operator.get("/metrics")
    assert answer.status_code == 200, answer.text[:2000]
    line = next(
        line
        for line in answer.text.splitlines()
        if line.startswith("nachtwacht_agents_by_updater_version{")
    )
    assert _OBEYED.search(answer.text) is None, line
    assert "0.9.0\\\\u001b[2J" in line, line


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"slot_key": ["2026\u202e", "\x1b[2J"]}, id="a_list_of_texts"),
        pytest.param({"slot_key": {"k\u2066": "\x9b31m"}}, id="an_object"),
        pytest.param({"slot_key": SLOT, "from_version": 7, "extra\u202e": 1}, id="a_key"),
        # Refused at the door (a NUL PostgreSQL cannot store), named by its key.
        pytest.param({"slot_key": SLOT, "x\u202e\x9b": "nul\x00"}, id="a_key_at_the_door"),
    ],
)
def test_a_refused_body_is_quoted_back_inert(
    agent_requests: AgentRequests, body: dict[str, Any]
) -> None:
    """What a caller sent, quoted back in a 422, is read, not obeyed: JSON that is no text
    (a list, an object) holds texts too."""
    response = agent_requests.send(
        "POST",
        "/v1/agent/claims",
        [(b"content-type", b"application/json")],
        json.dumps(body).encode(),
    )
    assert response.status_code == 422, response.text[:2000]
    assert _obeyed(response.json()) == [], response.json()
