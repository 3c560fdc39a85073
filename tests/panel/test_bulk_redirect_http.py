"""The agent list's bulk forms answer with a redirect to the list (POST/redirect/GET): a reload
shows the list again and posts nothing; the result is said once, on the page the redirect leads
to. A form sent twice all the same (a double click, a reload that re-posts) holds nothing twice:
no second `hold.set`, and the page says the agents were held so already."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import httpx

from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client
from tests.panel.test_agent_list_http import add_agents
from tests.panel.test_fleet_bulk_http import trail


def _bulk(client: httpx.Client, path: str, data: dict[str, object]) -> httpx.Response:
    csrf = csrf_of(client.get("/panel/agents").text)
    return client.post(path, data={"csrf": csrf, **data})


def test_a_bulk_hold_redirects_to_the_list_and_says_its_result_once(
    panel_world: PanelWorld,
) -> None:
    add_agents(panel_world, [f"db-{i}" for i in range(3)])
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        form = {
            "action": "hold",
            "target": "matching",
            "count": "4",
            "until": "2027-04-02",
            "reason": "quarter close <&> \"'",
            "q": "",
            "state": "",
            "sort": "-name",
        }
        answer = _bulk(client, "/panel/agents/bulk", form)
        assert answer.status_code == 303, answer.text
        target = answer.headers["location"]
        address = urlsplit(target)
        assert address.path == "/panel/agents"
        assert parse_qs(address.query) == {"sort": ["-name"]}
        shown = client.get(target)
        assert shown.status_code == 200
        assert "4 agents are held until April 2." in shown.text
        # Said once: the same address again is the list without it.
        assert "are held until" not in client.get(target).text

        # The same form again (a reload that re-posts, a double click): nothing is held twice.
        again = _bulk(client, "/panel/agents/bulk", form)
        assert again.status_code == 303
        shown_again = client.get(again.headers["location"])
    assert "4 agents were already held so: nothing changed for them." in shown_again.text
    assert len(trail(panel_world, "hold.set")) == 4


def test_a_bulk_schedule_redirects_to_the_list_and_says_its_result(
    panel_world: PanelWorld,
) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        form = {
            "enabled": "1",
            "times": "02:00",
            "target": "selected",
            "agent": [panel_world.agent_id],
            "q": "web & co",
        }
        answer = _bulk(client, "/panel/agents/schedules", form)
        assert answer.status_code == 303, answer.text
        target = answer.headers["location"]
        assert parse_qs(urlsplit(target).query) == {"q": ["web & co"]}
        shown = client.get(target)
    assert "The schedule of 1 agent changed." in shown.text
    assert "0 agents already had it." in shown.text
