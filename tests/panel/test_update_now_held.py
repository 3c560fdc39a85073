""" "Update now" on a held agent: a held agent takes no update, not even one asked for now, so
its page shows why instead of a button that would lead to a request waiting for nothing; a post
from a page opened before the hold asks nothing and says why. A normal agent keeps its button."""

from __future__ import annotations

import html
import re

import httpx
import psycopg

from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client

HELD = (
    "“Update now” is not available while the agent is held: a held agent takes no update, not"
    " even one asked for now. End the hold above to update it now."
)


def _runs(world: PanelWorld) -> list[tuple[object, ...]]:
    with psycopg.connect(world.server.database_url) as conn:
        return conn.execute("SELECT id, trigger, status FROM runs").fetchall()


def _requested(world: PanelWorld) -> int:
    with psycopg.connect(world.server.database_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM events WHERE kind = 'update.requested' AND agent_id = %s",
            [world.agent_id],
        ).fetchone()
    assert row is not None
    return int(row[0])


def _update_button(page: str, world: PanelWorld) -> bool:
    return f'action="/panel/agents/{world.agent_id}/update"' in page


def _words(page: str, element_id: str) -> str:
    inner = page.split(f'id="{element_id}"', 1)[1].split(">", 1)[1].split("</p>", 1)[0]
    return html.unescape(" ".join(re.sub(r"<[^>]+>", "", inner).split()))


def _hold(client: httpx.Client, world: PanelWorld) -> None:
    page = client.get(f"/panel/agents/{world.agent_id}")
    answer = client.post(
        f"/panel/agents/{world.agent_id}/hold",
        data={"until": "2027-04-02", "reason": "the audit week", "csrf": csrf_of(page.text)},
    )
    assert answer.status_code == 303


def test_a_normal_agent_has_the_button_and_its_request_is_made(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        page = client.get(f"/panel/agents/{panel_world.agent_id}")
        assert _update_button(page.text, panel_world)
        assert 'id="update-now-held"' not in page.text
        answer = client.post(
            f"/panel/agents/{panel_world.agent_id}/update", data={"csrf": csrf_of(page.text)}
        )
    assert answer.status_code == 303
    assert f"/panel/agents/{panel_world.agent_id}/updates/" in answer.headers["location"]
    assert [(trigger, status) for _, trigger, status in _runs(panel_world)] == [
        ("manual", "requested")
    ]
    assert _requested(panel_world) == 1


def test_a_held_agent_shows_why_instead_of_the_button(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        _hold(client, panel_world)
        page = client.get(f"/panel/agents/{panel_world.agent_id}")
    assert page.status_code == 200
    assert not _update_button(page.text, panel_world)
    assert _words(page.text, "update-now-held") == HELD


def test_update_now_from_a_page_opened_before_the_hold_asks_nothing(
    panel_world: PanelWorld,
) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        before = client.get(f"/panel/agents/{panel_world.agent_id}")
        assert _update_button(before.text, panel_world)
        _hold(client, panel_world)
        answer = client.post(
            f"/panel/agents/{panel_world.agent_id}/update", data={"csrf": csrf_of(before.text)}
        )
    assert answer.status_code == 409
    assert 'id="update-now-held" class="warning" role="alert"' in answer.text
    assert _words(answer.text, "update-now-held") == HELD
    assert _runs(panel_world) == []
    assert _requested(panel_world) == 0


def test_in_dutch_the_reason_is_in_dutch(panel_world: PanelWorld) -> None:
    with sign_in_client(
        panel_world, panel_world.panel_key, headers={"Accept-Language": "nl"}
    ) as client:
        _hold(client, panel_world)
        page = client.get(f"/panel/agents/{panel_world.agent_id}")
    assert _words(page.text, "update-now-held").startswith("“Nu bijwerken” kan niet")
