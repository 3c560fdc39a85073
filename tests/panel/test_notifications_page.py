"""The notifications page names the agents a person has to look at: failures with their reasons
first, then misses with theirs, at most a handful, the rest counted with a link to the list."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from control_plane.panel.event_wording import NAMED_AGENTS
from tests.panel.conftest import PanelWorld, sign_in_client

HOSTILE = '<img src=x onerror="alert(1)">'


def _notify(world: PanelWorld, body: dict[str, Any]) -> None:
    with psycopg.connect(world.server.database_url) as conn:
        conn.execute(
            "INSERT INTO notifications (org_id, slot_key, slot_at, created_at, body)"
            " VALUES (%s, '2027-03-26T03:00', '2027-03-26T02:00Z', '2027-03-26T02:20Z', %s)",
            [world.org_id, json.dumps(body)],
        )


def _body(failed: list[dict[str, Any]], missed: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "kind": "scheduled_updates",
        "counts": {"agents": len(failed) + len(missed), "missed": len(missed)},
        "updated": [],
        "failed": failed,
        "missed": missed,
        "missed_by_reason": {"offline": len(missed)} if missed else {},
        "no_outcome": [],
        "not_updated_for_three_days": [],
    }


def test_a_notification_names_who_failed_and_why_before_who_missed(panel_world: PanelWorld) -> None:
    failed = [
        {
            "agent_id": panel_world.agent_id,
            "name": "web-01",
            "status": "rolled_back",
            "reason": "health_check_failed",
        }
    ]
    missed = [{"agent_id": panel_world.agent_id, "name": HOSTILE, "reason": "offline"}]
    _notify(panel_world, _body(failed, missed))
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        html = client.get("/panel/notifications").text
    named = html.split('<ul class="named-agents">', 1)[1].split("</ul>", 1)[0]
    first, second = named.split("<li>")[1:]
    assert f'href="/panel/agents/{panel_world.agent_id}">web-01</a>' in first
    assert "rolled back: the new version was not healthy in time" in first
    assert "missed: offline" in second
    # A name is the customer's text: shown, never run.
    assert HOSTILE not in html
    assert "&lt;img src=x onerror=" in second


def test_a_long_list_is_cut_short_with_a_link_to_all_agents(panel_world: PanelWorld) -> None:
    missed = [
        {"agent_id": panel_world.agent_id, "name": f"web-{n:02d}", "reason": "offline"}
        for n in range(NAMED_AGENTS + 3)
    ]
    _notify(panel_world, _body([], missed))
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        html = client.get("/panel/notifications").text
    named = html.split('<ul class="named-agents">', 1)[1].split("</ul>", 1)[0]
    assert named.count("<li>") == NAMED_AGENTS
    assert f"web-{NAMED_AGENTS - 1:02d}" in named and f"web-{NAMED_AGENTS:02d}" not in html
    assert '<a href="/panel/agents">and 3 more agents</a>' in html
